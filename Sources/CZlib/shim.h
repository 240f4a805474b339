// zlib for Swift: FHIR packages are gzipped tar files. `inflateInit2` is a macro, which Swift
// cannot call, so a wrapper passes the library's version and stream size as the macro does.
#ifndef CAREGATE_ZLIB_SHIM_H
#define CAREGATE_ZLIB_SHIM_H

#include <zlib.h>

static inline int caregate_inflate_init(z_stream *stream, int windowBits) {
    return inflateInit2(stream, windowBits);
}

static inline int caregate_deflate_init(z_stream *stream, int level) {
    return deflateInit(stream, level);
}

#endif
