import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { chooseProvider, providersToProbe, type ProviderReport, type WebGpuStatus } from './provider-choice.ts';

const base = { ortVersion: '1.30.0', backends: ['cpu', 'webgpu', 'cuda'] } as const;
const cudaOk = { available: true, detail: 'CUDA device 0' };
const cudaMissing = { available: false, detail: 'cuda provider libraries are not installed' };
const hardware: WebGpuStatus = { available: true, detail: 'hardware adapter', adapter: 'hardware' };
const software: WebGpuStatus = { available: true, detail: 'software adapter only (lavapipe)', adapter: 'software' };
const noAdapter: WebGpuStatus = { available: false, detail: 'no WebGPU adapter', adapter: null };
const report = (r: Partial<ProviderReport>): ProviderReport => ({ ...base, ...r });

describe('auto', () => {
  test('prefers cuda over a hardware webgpu adapter', () => {
    const d = chooseProvider('auto', report({ cuda: cudaOk, webgpu: hardware }));
    assert.equal(d.provider, 'cuda');
    assert.match(d.reason, /^auto chose cuda \(CUDA device 0\)$/);
  });

  test('takes a hardware webgpu adapter when cuda is missing, and says why not cuda', () => {
    const d = chooseProvider('auto', report({ cuda: cudaMissing, webgpu: hardware }));
    assert.equal(d.provider, 'webgpu');
    assert.match(d.reason, /auto chose webgpu \(hardware adapter; cuda: cuda provider libraries are not installed\)/);
  });

  test('never takes a software adapter: cpu, saying the adapter is software', () => {
    const d = chooseProvider('auto', report({ cuda: cudaMissing, webgpu: software }));
    assert.equal(d.provider, 'cpu');
    assert.match(d.reason, /auto chose cpu .*cuda: cuda provider libraries are not installed; webgpu: software adapter only \(lavapipe\), slower than cpu/);
  });

  test('falls to cpu with both reasons when no GPU provider works', () => {
    const d = chooseProvider('auto', report({ cuda: cudaMissing, webgpu: noAdapter }));
    assert.equal(d.provider, 'cpu');
    assert.match(d.reason, /cuda: cuda provider libraries are not installed; webgpu: no WebGPU adapter/);
  });

  test('probes both GPU providers', () => {
    assert.deepEqual(providersToProbe('auto'), ['cuda', 'webgpu']);
  });
});

describe('a provider named in the config', () => {
  test('cpu probes nothing', () => {
    assert.deepEqual(providersToProbe('cpu'), []);
    assert.deepEqual(chooseProvider('cpu', report({})), { provider: 'cpu', reason: 'cpu as configured' });
  });

  test('webgpu on a software adapter is used as asked, with a note that it is slow', () => {
    const d = chooseProvider('webgpu', report({ webgpu: software }));
    assert.equal(d.provider, 'webgpu');
    assert.match(d.reason, /webgpu as configured \(software adapter only \(lavapipe\); same results as cpu, much slower/);
  });

  test('an unavailable provider falls back to cpu with its reason', () => {
    assert.deepEqual(chooseProvider('webgpu', report({ webgpu: noAdapter })), { provider: 'cpu', reason: 'webgpu unavailable, fell back to cpu: no WebGPU adapter' });
    assert.deepEqual(chooseProvider('cuda', report({ cuda: cudaMissing })), { provider: 'cpu', reason: 'cuda unavailable, fell back to cpu: cuda provider libraries are not installed' });
  });

  test('a provider that was not probed is not taken', () => {
    assert.equal(chooseProvider('cuda', report({})).provider, 'cpu');
    assert.match(chooseProvider('cuda', report({})).reason, /cuda was not probed/);
  });
});
