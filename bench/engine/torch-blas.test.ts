import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { baselineFlags, bestCoreFor, checkFailures, chooseCore, coreRank, float32DotBound, mlasSgemmKernel, parseCpuinfo, parseOpenblasCore, type BlasProbe } from './torch-blas.ts';

// The first lines of /proc/cpuinfo on the two machines the benchmark met (flags cut to the relevant ones).
const epyc = `processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 26
model\t\t: 2
model name\t: AMD EPYC
flags\t\t: fpu sse sse2 pni ssse3 fma sse4_1 sse4_2 avx avx2 avx512f avx512dq avx512cd avx512bw avx512vl avx512_bf16 avx512_vnni

processor\t: 1
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu sse sse2
`;
const xeonFlags = 'fpu sse sse2 pni ssse3 fma sse4_1 sse4_2 avx avx2 avx512f avx512dq avx512cd avx512bw avx512vl avx512_vnni amx_int8 amx_bf16 amx_tile'.split(' ');
const avx2Flags = 'sse sse2 pni ssse3 sse4_2 avx avx2 fma'.split(' ');

function probe(core: string | null, gflops: number, err = 1e-7, coretypeEnv: string | null = core): BlasProbe {
  return { coretypeEnv, core, blasLibrary: core ? ['/usr/lib/libopenblasp-r0.3.21.so'] : ['/usr/lib/libmkl_rt.so'], gflops, gflopsTries: [gflops], checks: [{ shape: [512, 512, 512], entries: 256, maxScaledError: err }] };
}

describe('cpuinfo', () => {
  it('reads the first processor: vendor, family, model, flags', () => {
    const c = parseCpuinfo(epyc);
    assert.equal(c.model, 'AMD EPYC');
    assert.equal(c.vendor, 'AuthenticAMD');
    assert.equal(c.family, 26);
    assert.equal(c.modelNumber, 2);
    assert.ok(c.flags.includes('avx512vl') && c.flags.includes('avx512_vnni'));
    assert.equal(c.flags.length, 17);
  });

  it('a missing field is unknown or null, not a throw', () => {
    const c = parseCpuinfo('processor\t: 0\nfoo\t: bar\n');
    assert.deepEqual(c, { model: 'unknown', vendor: 'unknown', family: null, modelNumber: null, flags: [] });
  });
});

describe('OpenBLAS core', () => {
  it('reads the "Core:" line OPENBLAS_VERBOSE=2 prints, not the "Core not found" before it', () => {
    assert.equal(parseOpenblasCore('Core: Haswell\n'), 'Haswell');
    assert.equal(parseOpenblasCore('Core not found: Cooperlake\nCore: Cooperlake\nsome warning\n'), 'Cooperlake');
    assert.equal(parseOpenblasCore('Traceback: Core: x y\n'), null);
    assert.equal(parseOpenblasCore(''), null);
  });

  it('ranks cores by their fp32 GEMM kernel, case-blind', () => {
    assert.equal(coreRank('Cooperlake'), coreRank('SkylakeX'));
    assert.equal(coreRank('zen'), coreRank('Haswell'));
    assert.ok(coreRank('SkylakeX') > coreRank('Haswell') && coreRank('Haswell') > coreRank('Sandybridge') && coreRank('Sandybridge') > coreRank('Prescott'));
    assert.equal(coreRank('Nonesuch'), -1);
  });

  it('the widest core the flags allow', () => {
    assert.equal(bestCoreFor(parseCpuinfo(epyc).flags), 'SkylakeX');
    assert.equal(bestCoreFor(xeonFlags), 'SkylakeX');
    assert.equal(bestCoreFor(avx2Flags), 'Haswell');
    // AVX2 without FMA is not Haswell's kernel; AVX-512F alone is not SkylakeX's.
    assert.equal(bestCoreFor(avx2Flags.filter((f) => f !== 'fma')), 'Sandybridge');
    assert.equal(bestCoreFor([...avx2Flags, 'avx512f']), 'Haswell');
    assert.equal(bestCoreFor(['sse', 'sse2', 'pni']), 'Prescott');
    assert.equal(bestCoreFor([]), null);
  });

  it("names MLAS's fp32 kernel for the flags", () => {
    assert.equal(mlasSgemmKernel(xeonFlags), 'MLAS Avx512F');
    assert.equal(mlasSgemmKernel(avx2Flags), 'MLAS Fma3');
  });
});

describe('float64 check', () => {
  it('holds each error to k·2⁻²⁴ of Σ|ab|', () => {
    assert.equal(float32DotBound(512), 512 * 2 ** -24);
    assert.deepEqual(checkFailures(probe('SkylakeX', 200, 1e-7)), []);
    assert.equal(checkFailures(probe('SkylakeX', 200, 1e-4)).length, 1);
    assert.equal(checkFailures(probe('SkylakeX', 200, Number.NaN)).length, 1);
    assert.deepEqual(checkFailures({ ...probe('SkylakeX', 200), checks: [] }), ['no results were checked']);
  });
});

describe('chooseCore', () => {
  it('the Xeon case: OpenBLAS says Prescott, SkylakeX is right and 4x faster, so SkylakeX is pinned', () => {
    const c = chooseCore({ flags: xeonFlags, cpuidPick: 'Prescott', inherited: null, probes: [probe('Prescott', 47, 1e-7, null), probe('SkylakeX', 212)] });
    assert.equal(c.used, 'SkylakeX');
    assert.deepEqual(c.env, { OPENBLAS_CORETYPE: 'SkylakeX' });
    assert.equal(c.usedPeak, 212);
    assert.equal(c.problem, null);
  });

  it('the EPYC case: an inherited Haswell loses to the Cooperlake OpenBLAS picks itself', () => {
    const c = chooseCore({ flags: parseCpuinfo(epyc).flags, cpuidPick: 'Cooperlake', inherited: 'Haswell', probes: [probe('Cooperlake', 300, 1e-7, null), probe('Haswell', 150)] });
    assert.equal(c.used, 'Cooperlake');
    // Started as its probe ran: OPENBLAS_CORETYPE unset (this OpenBLAS cannot force Cooperlake by name).
    assert.deepEqual(c.env, { OPENBLAS_CORETYPE: undefined });
  });

  it('a wider core within noise of the fastest is still taken; a clearly slower one is not', () => {
    assert.equal(chooseCore({ flags: xeonFlags, cpuidPick: 'Haswell', inherited: null, probes: [probe('Haswell', 100, 1e-7, null), probe('SkylakeX', 85)] }).used, 'SkylakeX');
    const slow = chooseCore({ flags: xeonFlags, cpuidPick: 'Haswell', inherited: null, probes: [probe('Haswell', 100, 1e-7, null), probe('SkylakeX', 70)] });
    assert.equal(slow.used, 'Haswell');
    assert.match(slow.problem ?? '', /narrower than SkylakeX/);
  });

  it('a core with wrong results is never chosen, however fast', () => {
    const c = chooseCore({ flags: xeonFlags, cpuidPick: 'Prescott', inherited: null, probes: [probe('Prescott', 47, 1e-7, null), probe('SkylakeX', 212, 1e-3)] });
    assert.equal(c.used, 'Prescott');
    assert.match(c.reason, /failed the float64 check: SkylakeX/);
    assert.match(c.problem ?? '', /Prescott is narrower than SkylakeX/);
  });

  it('without OpenBLAS there is nothing to pin', () => {
    const c = chooseCore({ flags: xeonFlags, cpuidPick: null, inherited: null, probes: [probe(null, 300, 1e-7, null)] });
    assert.equal(c.used, null);
    assert.deepEqual(c.env, {});
    assert.match(c.reason, /libmkl_rt/);
  });

  it('a forced core is used when it passed, and is a problem when it was not there', () => {
    const probes = [probe('Cooperlake', 300, 1e-7, null), probe('Haswell', 150)];
    const flags = parseCpuinfo(epyc).flags;
    assert.equal(chooseCore({ flags, cpuidPick: 'Cooperlake', inherited: null, probes, forced: 'haswell' }).used, 'Haswell');
    assert.match(chooseCore({ flags, cpuidPick: 'Cooperlake', inherited: null, probes, forced: 'Zen' }).problem ?? '', /BENCH_TORCH_CORETYPE=Zen/);
  });
});

describe('baselineFlags', () => {
  const ok = { used: 'SkylakeX', usedPeak: 200, problem: null };
  const quiet = { start: 0.5, end: 1.2 };
  it('a run near its kernel, near MLAS, on a quiet machine carries no flag', () => {
    assert.deepEqual(baselineFlags({ pytorchPeak: 150, troupePeak: 200, choice: ok, loadAverage: quiet, cores: 2 }), []);
  });

  it('a peak under half of what the kernel reached in the probe', () => {
    assert.deepEqual(baselineFlags({ pytorchPeak: 99, troupePeak: 150, choice: ok, loadAverage: quiet, cores: 2 }).map((f) => f.code), ['peak-below-kernel']);
    assert.deepEqual(baselineFlags({ pytorchPeak: 100, troupePeak: 150, choice: ok, loadAverage: quiet, cores: 2 }), []);
  });

  it('a peak under half of MLAS in the same rounds', () => {
    assert.deepEqual(baselineFlags({ pytorchPeak: 110, troupePeak: 230, choice: ok, loadAverage: quiet, cores: 2 }).map((f) => f.code), ['peak-below-mlas']);
  });

  it("the kernel choice's problem, and a busy machine", () => {
    const f = baselineFlags({ pytorchPeak: 150, troupePeak: 200, choice: { ...ok, problem: 'Prescott is narrower than SkylakeX' }, loadAverage: { start: 1, end: 6.5 }, cores: 2 });
    assert.deepEqual(f.map((x) => x.code), ['kernel-problem', 'machine-busy']);
    assert.match(f[1]!.message, /6\.5 at the end, on 2 cores/);
  });
});
