// How glibc's heaps grow for `caregate import`, set before any thread allocates.
//
// A worker thread's heap grows by what each allocation needs, page by page, each step an
// `mprotect` that every core running the process must see: some 4,000 of them in an import of
// the 20 Synthea bundles. An import is a short-lived command, so its heaps are made 64 MiB at a
// time instead (address space, not memory, until used). This has to happen before the first
// thread has its heap, which is before Swift code runs: hence a constructor, which glibc calls
// with the program's arguments. `serve` keeps glibc's defaults: a long-running process would keep
// that much of each heap's freed memory.
#include "HeapGrowth.h"

#include <string.h>
#if defined(__linux__)
#include <malloc.h>
#endif

long caregate_heap_growth_step(int argc, const char *const *argv) {
    return argc > 1 && argv[1] != NULL && strcmp(argv[1], "import") == 0 ? 64L << 20 : 0;
}

#if defined(__GLIBC__) && defined(M_TOP_PAD)
__attribute__((constructor))
static void caregate_import_heap_growth(int argc, char **argv, char **envp) {
    (void)envp;
    long step = caregate_heap_growth_step(argc, (const char *const *)argv);
    if (step > 0) {
        mallopt(M_TOP_PAD, (int)step);
    }
}
#endif
