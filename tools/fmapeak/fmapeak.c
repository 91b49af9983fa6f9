// fmapeak: one core's peak float32 rate with AVX-512 fused multiply-add and
// with a separate multiply and add (what `numerics: exact` must use, since
// fusing changes the rounding). 12 independent chains per loop keep both
// FMA ports busy; the best of 15 runs is printed, as the machine is shared.
// Build and run: make fma-peak
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

#define LANES 16
#define CHAINS 12
#define FLOPS 200000000L

int main(void) {
	__m512 a[CHAINS], b = _mm512_set1_ps(1.0000001f), c = _mm512_set1_ps(1e-7f);
	for (int j = 0; j < CHAINS; j++) a[j] = _mm512_set1_ps((float)j);
	double fma = 0, muladd = 0;
	for (int rep = 0; rep < 15; rep++) {
		double t0 = now();
		for (long i = 0; i < FLOPS / 2 / CHAINS / LANES; i++)
			for (int j = 0; j < CHAINS; j++) a[j] = _mm512_fmadd_ps(a[j], b, c);
		double f = FLOPS / (now() - t0);
		if (f > fma) fma = f;
		t0 = now();
		for (long i = 0; i < FLOPS / 2 / CHAINS / LANES; i++)
			for (int j = 0; j < CHAINS; j++) a[j] = _mm512_add_ps(_mm512_mul_ps(a[j], b), c);
		f = FLOPS / (now() - t0);
		if (f > muladd) muladd = f;
	}
	float sink = 0, o[LANES];
	for (int j = 0; j < CHAINS; j++) {
		_mm512_storeu_ps(o, a[j]);
		sink += o[0];
	}
	printf("one core, float32: FMA %.1f GFLOP/s, multiply + add %.1f GFLOP/s: %.2fx (checksum %g)\n",
	       fma / 1e9, muladd / 1e9, muladd / fma, sink);
	return 0;
}
