/**
 * The engine worker: owns ONNX Runtime sessions and resident tensors, off the main thread.
 * `session.run` blocks its thread for the whole call (the probe measured 110 ms per train step),
 * so it must never run on the event loop that serves the editor.
 */
import { parentPort } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';
import { DeviceTensors } from './device-tensors.ts';
import { generate, type GenerateStep } from './generate.ts';
import type { ExecutionProviderName, Fetch, Feed, Reply, Request, WorkerMessage } from './messages.ts';
import { chooseProvider, providersToProbe } from './provider-choice.ts';
import { firstLine, probeProviders, runProbeModel } from './provider-probe.ts';
import { allocate, type HostTensor } from './tensor.ts';

if (!parentPort) throw new Error('engine-worker must run in a worker thread');
const port = parentPort;

const sessions = new Map<string, ort.InferenceSession>();
/** Sessions that run on the GPU provider (not those that fell back to the CPU): fed device copies. */
const onDevice = new Set<ort.InferenceSession>();
/**
 * Per GPU session, the outputs it leaves on the device (`SessionOptions.outputsOnDevice`): a fetch
 * of one `into` a resident makes that resident the device tensor itself, so gradients, weights
 * and optimizer state of a train step and AdamW stay on the GPU between runs.
 */
const deviceOutputs = new Map<ort.InferenceSession, ReadonlySet<string>>();
const residents = new Map<string, ort.Tensor>();
/** WebGPU: tensors kept on the GPU (device copies of residents, helper operations), so runs do not copy the weights there each time. */
let device: DeviceTensors | null = null;
/** Sessions created with a profile: their profile is written when they are released. */
const profiled = new Set<ort.InferenceSession>();
let provider: ExecutionProviderName = 'cpu';
let threads = 2;

function log(line: string): void {
  port.postMessage({ id: -1, log: line } satisfies WorkerMessage);
}

function toOrt(t: HostTensor): ort.Tensor {
  return new ort.Tensor(t.dtype, t.data as never, [...t.dims]);
}

function toHost(t: ort.Tensor): HostTensor {
  return { dtype: t.type as HostTensor['dtype'], dims: [...t.dims], data: t.data as HostTensor['data'] };
}

function resident(name: string): ort.Tensor {
  const t = residents.get(name);
  if (!t) throw new Error(`no resident tensor named '${name}'`);
  return t;
}

function sessionOf(name: string): ort.InferenceSession {
  const s = sessions.get(name);
  if (!s) throw new Error(`no session named '${name}'`);
  return s;
}

/**
 * Picks the execution provider (`provider-choice.ts` says how `auto` decides) after probing the
 * candidates. A provider that fails falls back to CPU with the reason: the probe found
 * `['webgpu','cpu']` throws instead of falling back, so fallback is done here, explicitly.
 */
async function init(req: Request & { kind: 'init' }): Promise<Reply> {
  threads = req.threads;
  const report = await probeProviders(providersToProbe(req.provider));
  let decision = chooseProvider(req.provider, report);
  if (decision.provider === 'webgpu') {
    // The adapter was found in a child process; make sure this process gets one too.
    const why = await runProbeModel('webgpu');
    if (why !== null) decision = { provider: 'cpu', reason: `${decision.reason}, but it failed in the engine (${why}); using cpu` };
  }
  provider = decision.provider;
  if (provider === 'webgpu') device = new DeviceTensors('webgpu');
  return { kind: 'init', provider, reason: decision.reason, report };
}

async function createSession(req: Request & { kind: 'createSession' }): Promise<Reply> {
  const opts: ort.InferenceSession.SessionOptions = {
    executionProviders: [provider],
    graphOptimizationLevel: req.options.optimization ?? 'all',
    intraOpNumThreads: req.options.threads ?? threads,
    interOpNumThreads: 1,
    logSeverityLevel: 3,
    // Batch and sequence sizes change on every call in RL; ORT's memory-pattern cache keeps a plan
    // (and arena blocks) per distinct input shape and grew a 15-minute run past 5 GB. Without it
    // the arena still reuses freed blocks.
    enableMemPattern: false,
    enableCpuMemArena: req.options.memoryArena ?? true,
    ...(req.options.spinning === undefined ? {} : { extra: { session: { intra_op: { allow_spinning: req.options.spinning ? '1' : '0' } } } }),
    ...(req.options.profileFilePrefix === undefined ? {} : { enableProfiling: true, profileFilePrefix: req.options.profileFilePrefix }),
    ...(provider === 'webgpu' && req.options.outputsOnDevice?.length ? { preferredOutputLocation: Object.fromEntries(req.options.outputsOnDevice.map((n) => [n, 'gpu-buffer' as const])) } : {}),
  };
  let s: ort.InferenceSession;
  try {
    s = await ort.InferenceSession.create(req.model, opts);
    if (provider === 'webgpu') {
      onDevice.add(s);
      if (req.options.outputsOnDevice?.length) deviceOutputs.set(s, new Set(req.options.outputsOnDevice));
    }
  } catch (e) {
    if (provider === 'cpu') throw new Error(`session '${req.session}': ONNX Runtime rejected the model: ${firstLine(e)}`);
    log(`session '${req.session}': ${provider} rejected it (${firstLine(e)}); using cpu for this session`);
    const { preferredOutputLocation: _, ...onCpu } = opts;
    s = await ort.InferenceSession.create(req.model, { ...onCpu, executionProviders: ['cpu'] });
  }
  if (req.options.profileFilePrefix !== undefined) profiled.add(s);
  await release(sessions.get(req.session));
  sessions.set(req.session, s);
  return { kind: 'session', info: { inputNames: s.inputNames, outputNames: s.outputNames, executionProvider: provider } };
}

async function release(s: ort.InferenceSession | undefined): Promise<void> {
  if (!s) return;
  if (profiled.delete(s)) s.endProfiling();
  onDevice.delete(s);
  deviceOutputs.delete(s);
  await s.release();
}

/** A resident as session `s` takes it: on the device for a GPU session, on the host otherwise. */
function residentFor(s: ort.InferenceSession, name: string): Promise<ort.Tensor> | ort.Tensor {
  const t = resident(name);
  if (!device) return t;
  return onDevice.has(s) ? device.of(t) : device.toHost(t);
}

/** Resident `name` on the host (a copy when it lives on the device). */
function residentOnHost(name: string): Promise<ort.Tensor> | ort.Tensor {
  const t = resident(name);
  return device ? device.toHost(t) : t;
}

/**
 * Replaces (or with `t` undefined, drops) resident `name`. The old tensor's device copy is freed,
 * and the old tensor itself when it lived on the device (no other resident holds it: swap moves
 * tensors between names, nothing shares one).
 */
function setResident(name: string, t: ort.Tensor | undefined): void {
  const old = residents.get(name);
  device?.stale(old);
  if (old && old !== t && old.location !== 'cpu') old.dispose();
  if (t) residents.set(name, t);
  else residents.delete(name);
}

function bytesOf(t: ort.Tensor): number {
  return t.location === 'cpu' ? (t.data as HostTensor['data']).byteLength : t.size * bytesPerElement(t.type);
}

const BYTES_PER_ELEMENT: Partial<Record<ort.Tensor.Type, number>> = { float16: 2, int16: 2, uint16: 2, int64: 8, uint64: 8, float64: 8, uint8: 1, int8: 1, bool: 1 };

function bytesPerElement(type: ort.Tensor.Type): number {
  return BYTES_PER_ELEMENT[type] ?? 4;
}

function fetchTarget(f: Fetch): ort.Tensor | null {
  if (f === 'return') return null;
  const existing = residents.get(f.into);
  if (existing && existing.location === 'cpu' && existing.type === f.dtype && existing.dims.length === f.dims.length && existing.dims.every((d, i) => d === f.dims[i])) return existing;
  const t = new ort.Tensor(f.dtype, allocate(f.dtype, f.dims) as never, [...f.dims]);
  setResident(f.into, t);
  return t;
}

async function run(req: Request & { kind: 'run' }): Promise<Reply> {
  const s = sessionOf(req.session);
  const feeds: Record<string, ort.Tensor> = {};
  for (const [name, f] of Object.entries(req.feeds)) feeds[name] = 'resident' in f ? await residentFor(s, f.resident) : toOrt(f);
  const targets: Record<string, ort.Tensor> = {};
  const returned: string[] = [];
  const kept = deviceOutputs.get(s);
  /** Outputs left on the device, and the resident each becomes. */
  const toDevice: Array<[output: string, into: Exclude<Fetch, 'return'>]> = [];
  for (const [name, f] of Object.entries(req.fetches)) {
    if (f !== 'return' && kept?.has(name)) {
      toDevice.push([name, f]);
      continue;
    }
    const t = fetchTarget(f);
    if (t) targets[name] = t;
    else returned.push(name);
  }
  let result: ort.InferenceSession.OnnxValueMapType;
  if (returned.length === 0 && toDevice.length === 0) {
    result = await s.run(feeds, targets);
  } else {
    // Mixed: preallocated outputs are passed as a fetch map; outputs to return, or to leave on
    // the device, get null slots (ONNX Runtime allocates them where the session says).
    const fetches: Record<string, ort.Tensor | null> = { ...targets };
    for (const name of [...returned, ...toDevice.map(([n]) => n)]) fetches[name] = null;
    result = await s.run(feeds, fetches as ort.InferenceSession.FetchesType);
  }
  // The run wrote into these residents: their device copies are out of date.
  for (const t of Object.values(targets)) device?.stale(t);
  for (const [name, f] of toDevice) {
    const t = result[name] as ort.Tensor | undefined;
    if (!t) throw new Error(`session '${req.session}' produced no output '${name}'`);
    if (t.type !== f.dtype || t.dims.length !== f.dims.length || t.dims.some((d, i) => d !== f.dims[i])) {
      throw new Error(`session '${req.session}': output '${name}' is ${t.type}[${t.dims.join(', ')}], the fetch into '${f.into}' wants ${f.dtype}[${f.dims.join(', ')}]`);
    }
    setResident(f.into, t);
  }
  const outputs: Record<string, HostTensor> = {};
  for (const name of returned) {
    const t = result[name];
    if (!t) throw new Error(`session '${req.session}' produced no output '${name}'`);
    outputs[name] = toHost(t as ort.Tensor);
  }
  return { kind: 'outputs', outputs };
}

function transferables(reply: Reply): ArrayBuffer[] {
  const bufs: ArrayBuffer[] = [];
  const add = (t: HostTensor) => {
    const b = t.data.buffer;
    if (b instanceof ArrayBuffer && !bufs.includes(b)) bufs.push(b);
  };
  if (reply.kind === 'outputs') Object.values(reply.outputs).forEach(add);
  if (reply.kind === 'tensor') add(reply.tensor);
  return bufs;
}

async function handle(req: Request, id: number): Promise<Reply> {
  switch (req.kind) {
    case 'init':
      return init(req);
    case 'createSession':
      return createSession(req);
    case 'releaseSession': {
      await release(sessions.get(req.session));
      sessions.delete(req.session);
      return { kind: 'ok' };
    }
    case 'upload':
      setResident(req.name, toOrt(req.tensor));
      return { kind: 'ok' };
    case 'download': {
      const t = await residentOnHost(req.name);
      const all = t.data as HostTensor['data'];
      // Copy: the resident keeps its buffer; the copy is transferred to the caller.
      if (!req.rows) return { kind: 'tensor', tensor: { dtype: t.type as HostTensor['dtype'], dims: [...t.dims], data: all.slice() } };
      const { start, count } = req.rows;
      const [rows, ...rest] = t.dims;
      if (rows === undefined || !Number.isInteger(start) || !Number.isInteger(count) || start < 0 || count < 0 || start + count > rows) {
        throw new Error(`download '${req.name}': rows ${start}..${start + count - 1} are outside its dims [${t.dims.join(', ')}]`);
      }
      const rowLength = rest.reduce((a, b) => a * b, 1);
      const data = all.slice(start * rowLength, (start + count) * rowLength);
      return { kind: 'tensor', tensor: { dtype: t.type as HostTensor['dtype'], dims: [count, ...rest], data } };
    }
    case 'drop':
      for (const n of req.names) setResident(n, undefined);
      return { kind: 'ok' };
    case 'swap': {
      for (const [x, y] of req.pairs) {
        const a = resident(x);
        residents.set(x, resident(y));
        residents.set(y, a);
      }
      return { kind: 'ok' };
    }
    case 'accumulate': {
      for (const [into, from] of req.pairs) {
        const a = resident(into);
        const b = resident(from);
        if (device && (a.location !== 'cpu' || b.location !== 'cpu')) {
          setResident(into, await device.addScaled(await device.of(a), await device.of(b), req.scale));
          continue;
        }
        device?.stale(a);
        const dst = resident(into).data as Float32Array;
        const src = resident(from).data as Float32Array;
        if (dst.length !== src.length) throw new Error(`accumulate: '${into}' has ${dst.length} elements, '${from}' ${src.length}`);
        const k = req.scale;
        for (let i = 0; i < dst.length; i++) dst[i]! += k * src[i]!;
      }
      return { kind: 'ok' };
    }
    case 'run':
      return run(req);
    case 'generate': {
      const s = sessionOf(req.request.session);
      const weights: Record<string, ort.Tensor> = {};
      for (const [input, name] of Object.entries(req.request.params)) weights[input] = await residentFor(s, name);
      const onStep = req.steps ? (step: GenerateStep) => port.postMessage({ id, step } satisfies WorkerMessage) : undefined;
      return { kind: 'generated', result: await generate(req.request, s, weights, device, onStep) };
    }
    case 'stats': {
      let residentBytes = 0;
      for (const t of residents.values()) residentBytes += bytesOf(t);
      return {
        kind: 'stats',
        stats: { residentTensors: residents.size, residentBytes, sessions: sessions.size, deviceCopies: device?.count ?? 0, deviceCopyBytes: device?.bytes ?? 0, deviceUploads: device?.uploads ?? 0 },
      };
    }
  }
}

// Requests are handled strictly in order: sessions share the thread pool and the residents.
let queue: Promise<void> = Promise.resolve();
port.on('message', (msg: { id: number; req: Request }) => {
  queue = queue.then(async () => {
    try {
      const reply = await handle(msg.req, msg.id);
      port.postMessage({ id: msg.id, ok: true, reply } satisfies WorkerMessage, transferables(reply));
    } catch (e) {
      port.postMessage({ id: msg.id, ok: false, error: e instanceof Error ? e.message : String(e) } satisfies WorkerMessage);
    }
  });
});

