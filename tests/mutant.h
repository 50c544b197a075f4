/*
 * mutant.h: the switch of the test builds that hold several mutants in one binary (a build of
 * the emulated trainer takes minutes; one build instead of one per mutant). A mutated line
 * runs only when llmc_mutant(NAME) is 0: LLMC_MUTANT=NAME in the environment turns that
 * mutant on; unset, the binary is the unmutated source. Included with -include by the test
 * builds only (dev/cuda/cuda.mk, tests/cuda/test_trainer_detect.sh), never by a product build.
 */
#ifndef LLMC_TEST_MUTANT_H
#define LLMC_TEST_MUTANT_H

#include <stdlib.h>
#include <string.h>

// Under the emulation's race detector (ThreadSanitizer's instrumentation, tests/cuda/test_trainer_detect.sh) a
// guard inside a kernel would show its static as __shared__ memory every thread touches: a race of the switch
// itself, reported before the mutant's own. Not instrumented, and not inlined into an instrumented kernel.
#if defined(__SANITIZE_THREAD__)
#define LLMC_MUTANT_NOTSAN __attribute__((no_sanitize_thread, noinline))
#else
#define LLMC_MUTANT_NOTSAN
#endif
LLMC_MUTANT_NOTSAN static inline int llmc_mutant(const char* name) {
    static const char* on = getenv("LLMC_MUTANT"); // read once: the switch of the whole run
    return on != NULL && strcmp(on, name) == 0;
}

#endif // LLMC_TEST_MUTANT_H
