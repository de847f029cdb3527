/**
 * The OpenAI-compatible HTTP endpoint of Troupe's engine (`troupe serve-openai`): vLLM's routes
 * (`/v1/models`, `/v1/completions`, `/v1/chat/completions`, `/v1/load_lora_adapter`,
 * `/v1/unload_lora_adapter`) and SGLang's (`/generate`, `/load_lora_adapter`,
 * `/unload_lora_adapter`, `/update_weights_from_disk`, `/model_info`, `/get_weight_version`), over node:http.
 *
 * Like the editor server: every request needs `Authorization: Bearer <token>` (compared in
 * constant time), requests with an `Origin` header (browsers) are refused, and it listens on
 * loopback unless told otherwise. Bodies are bounded (`maxBodyBytes`, 413 past it), parsed as
 * JSON and then by the route's zod schema before anything runs; errors answer OpenAI's error body
 * with the field named and no value quoted.
 *
 * Streaming (`stream: true`) answers server-sent events in OpenAI's chunk format, one chunk per
 * token as the engine samples it, ending with `data: [DONE]` (`streaming.ts`).
 */
import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { z } from 'zod';
import {
  chatCompletionRequestSchema,
  completionRequestSchema,
  loadLoraRequestSchema,
  sglangGenerateRequestSchema,
  unloadLoraRequestSchema,
  unsupportedCompletionFields,
  updateWeightsFromDiskRequestSchema,
  type ChatCompletionRequest,
  type CompletionRequest,
  type ModelList,
} from '../protocol/openai-api.ts';
import {
  chatJob,
  chatPrompt,
  chatResponse,
  completionJob,
  completionPrompts,
  completionResponse,
  COMPLETIONS_DEFAULT_MAX_TOKENS,
  promptLogprobs,
  sample,
  SGLANG_DEFAULT_MAX_NEW_TOKENS,
  sglangJob,
  sglangOutputs,
} from './completions.ts';
import { RequestCancelled } from './batching-generator.ts';
import { ModelRequestError, UnknownModelError, type ServedModels } from './served-models.ts';
import { streamChat, streamCompletion } from './streaming.ts';

/** Default bound on a request body: 4096 prompts of ~1000 token ids fit. */
export const DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024;

export interface OpenAiServerOptions {
  readonly models: ServedModels;
  /** The bearer token clients must send. */
  readonly token: string;
  readonly host?: string;
  readonly port?: number;
  readonly maxBodyBytes?: number;
  readonly log?: (line: string) => void;
}

/** An answered error: status, OpenAI error type, the field at fault (if one), message. */
class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
  ) {
    super(message);
  }
}

const errorTypes: Record<number, string> = { 400: 'BadRequestError', 401: 'AuthenticationError', 403: 'PermissionDeniedError', 404: 'NotFoundError', 405: 'MethodNotAllowed', 413: 'RequestTooLarge', 500: 'InternalServerError' };

export class OpenAiServer {
  private constructor(
    private readonly http: Server,
    readonly url: string,
    readonly port: number,
  ) {}

  static async start(o: OpenAiServerOptions): Promise<OpenAiServer> {
    const log = o.log ?? (() => {});
    const limit = o.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    const http = createServer((req, res) => {
      handle(req, res, o.models, o.token, limit).catch((e: unknown) => {
        // The client left: nobody to answer.
        if (e instanceof RequestCancelled) return void res.destroy();
        if (e instanceof HttpError) return sendError(res, e);
        if (e instanceof UnknownModelError) return sendError(res, new HttpError(404, e.message, 'model'));
        if (e instanceof ModelRequestError) return sendError(res, new HttpError(400, e.message, e.param));
        log(`openai endpoint: ${req.method} ${req.url?.split('?')[0]} failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
        sendError(res, new HttpError(500, 'internal error (logged by the server)'));
      });
    });
    // Slow or stalled clients must not hold sockets for ever: the whole request (headers and
    // body) must arrive within these; generating the answer is not bounded by them.
    http.headersTimeout = 30_000;
    http.requestTimeout = 120_000;
    const host = o.host ?? '127.0.0.1';
    await new Promise<void>((ok, fail) => {
      http.once('error', fail);
      http.listen(o.port ?? 0, host, () => {
        http.off('error', fail);
        ok();
      });
    });
    const port = (http.address() as AddressInfo).port;
    const shown = host.includes(':') ? `[${host}]` : host;
    return new OpenAiServer(http, `http://${shown}:${port}/v1`, port);
  }

  /** Stops accepting and closes idle and active connections. */
  async close(): Promise<void> {
    await new Promise<void>((done) => {
      this.http.close(() => done());
      this.http.closeAllConnections();
    });
  }
}

function refusal(req: IncomingMessage, token: string): HttpError | null {
  if (req.headers.origin !== undefined) return new HttpError(403, 'requests from browser origins are refused: a web page may not drive a local engine');
  const match = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '');
  if (!match) return new HttpError(401, 'missing "Authorization: Bearer <token>" (the API key troupe serve-openai printed the file of)');
  const given = Buffer.from(match[1]!);
  const expected = Buffer.from(token);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return new HttpError(401, 'wrong API key');
  return null;
}

async function readJson(req: IncomingMessage, limit: number): Promise<unknown> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) throw new HttpError(413, `request body of ${declared} bytes is over the limit of ${limit}`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new HttpError(413, `request body is over the limit of ${limit} bytes`);
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch {
    // Deep nesting overflows the parser's stack too: also a bad body, not a server error.
    throw new HttpError(400, 'request body is not valid JSON');
  }
}

function parse<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const path = issue.path.map(String).join('.') || '(body)';
  throw new HttpError(400, `${path}: ${issue.message}`, path);
}

function checkSupported(r: CompletionRequest | ChatCompletionRequest): void {
  const bad = unsupportedCompletionFields(r)[0];
  if (bad) throw new HttpError(400, `${bad.field}: ${bad.message}`, bad.field);
}

async function handle(req: IncomingMessage, res: ServerResponse, models: ServedModels, token: string, limit: number): Promise<void> {
  const denied = refusal(req, token);
  if (denied) {
    // Unread bodies are dropped with the connection.
    res.setHeader('Connection', 'close');
    throw denied;
  }
  const path = (req.url ?? '/').split('?')[0]!;
  const route = `${req.method} ${path}`;
  // A client that disconnects before its answer is complete (a closed stream, an aborted fetch)
  // cancels its rows: the engine stops decoding them at its next step.
  const left = new AbortController();
  const signal = left.signal;
  res.once('close', () => {
    if (!res.writableFinished) left.abort();
  });
  const tok = models.tokenizer;
  switch (route) {
    case 'GET /health':
      return sendJson(res, 200, {});
    case 'GET /v1/models':
      return sendJson(res, 200, {
        object: 'list',
        data: models.list().map((m) => ({ id: m.id, object: 'model', created: m.created, owned_by: 'troupe', root: m.parent ?? m.id, parent: m.parent, max_model_len: m.maxModelLen })),
      } satisfies ModelList);
    case 'POST /v1/completions': {
      const r = parse(completionRequestSchema, await readJson(req, limit));
      checkSupported(r);
      const prompts = completionPrompts(r, tok);
      const job = completionJob(r, prompts);
      if (r.stream) {
        return models.use(r.model, async (policy) => {
          const promptLps = r.prompt_logprobs != null ? await Promise.all(prompts.map((p) => promptLogprobs(policy, tok, p, job.temperature, r.prompt_logprobs!))) : null;
          await streamCompletion(res, r, tok, prompts, job.n, promptLps, (onToken) => sample(policy, tok, job, COMPLETIONS_DEFAULT_MAX_TOKENS, models.batching, { onToken, signal }));
        });
      }
      const { choices, promptLps } = await models.use(r.model, async (policy) => ({
        choices: await sample(policy, tok, job, COMPLETIONS_DEFAULT_MAX_TOKENS, models.batching, { signal }),
        promptLps: r.prompt_logprobs != null ? await Promise.all(prompts.map((p) => promptLogprobs(policy, tok, p, job.temperature, r.prompt_logprobs!))) : null,
      }));
      return sendJson(res, 200, completionResponse(r, tok, prompts, choices, promptLps));
    }
    case 'POST /v1/chat/completions': {
      const r = parse(chatCompletionRequestSchema, await readJson(req, limit));
      checkSupported(r);
      const prompt = chatPrompt(r, tok);
      if (r.stream) return models.use(r.model, (policy) => streamChat(res, r, tok, prompt, (onToken) => sample(policy, tok, chatJob(r, prompt), 'rest', models.batching, { onToken, signal })));
      const choices = await models.use(r.model, (policy) => sample(policy, tok, chatJob(r, prompt), 'rest', models.batching, { signal }));
      return sendJson(res, 200, chatResponse(r, tok, prompt, choices));
    }
    case 'POST /generate': {
      const r = parse(sglangGenerateRequestSchema, await readJson(req, limit));
      if (r.stream) throw new HttpError(400, 'stream: streaming /generate is not supported; use /v1/completions with stream', 'stream');
      const job = sglangJob(r);
      const model = job.model ?? models.list()[0]?.id;
      if (model === undefined) throw new HttpError(404, 'no model is served', 'lora_path');
      const choices = await models.use(model, (policy) => sample(policy, tok, job, SGLANG_DEFAULT_MAX_NEW_TOKENS, models.batching, { signal }));
      const outputs = sglangOutputs(r, tok, job, choices);
      // SGLang answers a single prompt (n = 1) with one object, a batch with an array.
      return sendJson(res, 200, typeof r.input_ids[0] === 'number' && job.n === 1 ? outputs[0] : outputs);
    }
    case 'POST /v1/load_lora_adapter':
    case 'POST /load_lora_adapter': {
      const r = parse(loadLoraRequestSchema, await readJson(req, limit));
      if (r.load_inplace) throw new HttpError(400, 'load_inplace: adapters are loaded under new (versioned) names', 'load_inplace');
      await models.loadAdapter(r.lora_name, r.lora_path);
      return sendText(res, 200, `Success: LoRA adapter '${r.lora_name}' added successfully.`);
    }
    case 'POST /v1/unload_lora_adapter':
    case 'POST /unload_lora_adapter': {
      const r = parse(unloadLoraRequestSchema, await readJson(req, limit));
      await models.unload(r.lora_name).catch((e: unknown) => {
        if (e instanceof UnknownModelError) throw new HttpError(404, `the LoRA adapter '${r.lora_name}' is not loaded`, 'lora_name');
        throw e;
      });
      return sendText(res, 200, `Success: LoRA adapter '${r.lora_name}' removed successfully.`);
    }
    case 'POST /update_weights_from_disk': {
      const r = parse(updateWeightsFromDiskRequestSchema, await readJson(req, limit));
      if (r.load_format != null && r.load_format !== 'auto') throw new HttpError(400, 'load_format: Troupe reads a model folder as it finds it (a Troupe checkpoint or a Hugging Face folder); send null or "auto"', 'load_format');
      if (r.is_async || r.keep_pause) throw new HttpError(400, `${r.is_async ? 'is_async' : 'keep_pause'}: Troupe's engine updates in place and never pauses its scheduler`, r.is_async ? 'is_async' : 'keep_pause');
      try {
        await models.updateBaseWeights(r.model_path, r.troupe_model ?? null, r.weight_version ?? null);
      } catch (e) {
        // SGLang's failure form, with the field named in the message.
        if (e instanceof ModelRequestError) return sendJson(res, 400, { success: false, message: e.message, num_paused_requests: 0 });
        throw e;
      }
      return sendJson(res, 200, { success: true, message: 'Succeeded to update model weights.', num_paused_requests: 0 });
    }
    case 'GET /get_weight_version':
      return sendJson(res, 200, { weight_version: models.weightVersion });
    case 'GET /model_info':
      // SGLang's fields that mean something here (model_path: the served bases' ids).
      return sendJson(res, 200, { model_path: models.baseIds().join(','), is_generation: true, weight_version: models.weightVersion });
    default:
      throw new HttpError(404, `no route ${route}`);
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

function sendText(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

function sendError(res: ServerResponse, e: HttpError): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, e.status, { error: { message: e.message, type: errorTypes[e.status] ?? 'Error', param: e.param, code: e.status } });
}
