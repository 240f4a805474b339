#ifndef CAREGATE_HEAP_GROWTH_H
#define CAREGATE_HEAP_GROWTH_H

/// The padding (bytes) glibc's heaps take beyond what an allocation needs when a process with
/// these arguments makes or grows one: 64 MiB for `caregate import`, 0 (glibc's own) for any other
/// command. HeapGrowth.c applies it in a constructor, before any Swift code runs.
long caregate_heap_growth_step(int argc, const char *const *argv);

#endif
