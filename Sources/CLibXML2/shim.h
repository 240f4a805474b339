#ifndef CAREGATE_CLIBXML2_SHIM_H
#define CAREGATE_CLIBXML2_SHIM_H
#include <libxml/xmlreader.h>
#include <libxml/xmlerror.h>
#include <libxml/parser.h>
/* xmlFree is a global function pointer; Swift 6 cannot touch it safely, so call it here. */
static inline void caregate_xml_free(void *pointer) { xmlFree(pointer); }
#endif
