/*
 * rand.h: deterministic random numbers. A counter-based normal (hash of seed, stream and
 * index) so that any slice of a tensor can be drawn without drawing the rest: every
 * parallel layout gets the same initial weights. Plus a small sequential generator for
 * sampling text and shuffling, whose whole state is one uint64 (saved in checkpoints).
 */
#ifndef LLMC_RAND_H
#define LLMC_RAND_H

#include <math.h>
#include <stdint.h>

static inline uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

// uniform in (0, 1], from the top 53 bits
static inline double u64_to_unit(uint64_t x) { return ((double)(x >> 11) + 1.0) * (1.0 / 9007199254740992.0); }

// N(0,1) for element `index` of stream `stream` (a tensor id) under `seed` (Box-Muller)
static inline double normal_at(uint64_t seed, uint64_t stream, uint64_t index) {
    uint64_t k = splitmix64(seed ^ splitmix64(stream * 0x632BE59BD9B4E019ULL + 0x1234567ULL));
    uint64_t a = splitmix64(k ^ (2 * index));
    uint64_t b = splitmix64(k ^ (2 * index + 1));
    double u1 = u64_to_unit(a), u2 = u64_to_unit(b);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

// sequential generator (xorshift64*), state must be non-zero
static inline uint64_t rng_next(uint64_t* state) {
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}
static inline float rng_uniform(uint64_t* state) { return (float)((rng_next(state) >> 40) * (1.0 / 16777216.0)); }

#endif // LLMC_RAND_H
