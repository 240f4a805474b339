#ifndef CAREGATE_HEAP_GROWTH_H
#define CAREGATE_HEAP_GROWTH_H

// Nothing to call: HeapGrowth.c sets glibc's heap growth for `caregate import` in a constructor,
// before any Swift code runs. Linking the caregate executable with this target is all it takes.

#endif
