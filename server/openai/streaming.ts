/**
 * `stream: true` for completions and chat completions: server-sent events in OpenAI's chunk
 * format, one chunk per token, sent as the engine samples each token (`sample`'s `onToken`, fed
 * by the decode loop's per-step callback), then an optional usage chunk and `data: [DONE]`.
 *
 * The event stream's head is written with the first token, so a request that fails before any
 * token (a bad prompt, an unknown adapter) still gets an ordinary JSON error. A failure after
 * that can only end the connection.
 *
 * Text deltas are detokenized incrementally as vLLM does (`detokenize_incrementally`): the text a
 * token adds is the decoding of a short window of recent tokens minus that of the window without
 * it, held back while it ends in an incomplete character (U+FFFD), so that multi-token characters
 * come out whole and no chunk decodes the whole choice again. The last chunk of a choice carries
 * the rest of the whole decoding, so the chunks add up to the unstreamed `text`.
 */
import type { ServerResponse } from 'node:http';
import type { TextTokenizer } from '../models/folder-tokenizer.ts';
import type { ChatCompletionRequest, CompletionRequest } from '../protocol/openai-api.ts';
import { chatTokenLogprob, choiceText, completionTopLogprobs, now, requestId, tokenText, type SampledChoice, type SampledToken } from './completions.ts';

type Run = (onToken: (t: SampledToken) => void) => Promise<SampledChoice[]>;

/** Server-sent events on `res`, the head written with the first event. */
class EventStream {
  private started = false;
  constructor(private readonly res: ServerResponse) {}

  send(data: unknown): void {
    if (!this.started) {
      this.started = true;
      this.res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive' });
      // Each chunk goes out as it is written, not held back to fill a packet.
      this.res.socket?.setNoDelay(true);
    }
    this.res.write(`data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
  }

  end(): void {
    this.send('[DONE]');
    this.res.end();
  }
}

/** One choice's text, one token at a time (vLLM's prefix/read offsets). */
export class TextDeltas {
  private readonly tokens: number[] = [];
  private prefix = 0;
  private read = 0;
  private sent = '';

  constructor(private readonly tok: TextTokenizer) {}

  /** The text `token` adds ('' while held back); on the last token, all that is left. */
  push(token: number, last: boolean): string {
    this.tokens.push(token);
    let delta = '';
    if (last) {
      const all = choiceText(this.tok, this.tokens);
      delta = all.startsWith(this.sent) ? all.slice(this.sent.length) : '';
    } else {
      const before = choiceText(this.tok, this.tokens.slice(this.prefix, this.read));
      const now = choiceText(this.tok, this.tokens.slice(this.prefix));
      if (now.length > before.length && !now.endsWith('\uFFFD') && now.startsWith(before)) {
        delta = now.slice(before.length);
        this.prefix = this.read;
        this.read = this.tokens.length;
      }
    }
    this.sent += delta;
    return delta;
  }
}

/** Streams a completions request; `prompts` and `promptLogprobs` are per prompt, `n` choices each. */
export async function streamCompletion(
  res: ServerResponse,
  r: CompletionRequest,
  tok: TextTokenizer,
  prompts: readonly Int32Array[],
  n: number,
  promptLogprobs: ReadonlyArray<unknown> | null,
  run: Run,
): Promise<void> {
  const out = new EventStream(res);
  const head = { id: requestId('cmpl'), object: 'text_completion', created: now(), model: r.model };
  const asIds = r.return_tokens_as_token_ids ?? false;
  const texts = new Map<number, TextDeltas>();
  const choices = await run((t) => {
    let deltas = texts.get(t.choice);
    const first = !deltas;
    if (!deltas) texts.set(t.choice, (deltas = new TextDeltas(tok)));
    const prompt = Math.floor(t.choice / n);
    out.send({
      ...head,
      choices: [
        {
          index: t.choice,
          text: deltas.push(t.token, t.finish !== null),
          logprobs:
            r.logprobs != null
              ? {
                  text_offset: [0],
                  token_logprobs: [t.logprob],
                  tokens: [tokenText(tok, t.token, asIds)],
                  top_logprobs: [t.top ? completionTopLogprobs(tok, t.token, t.logprob, t.top.ids, t.top.logprobs, asIds) : null],
                }
              : null,
          finish_reason: t.finish,
          stop_reason: t.stopReason,
          ...(r.return_token_ids ? { token_ids: [t.token], ...(first ? { prompt_token_ids: Array.from(prompts[prompt]!) } : {}) } : {}),
          ...(first && promptLogprobs ? { prompt_logprobs: promptLogprobs[prompt] } : {}),
        },
      ],
    });
  });
  if (r.stream_options?.include_usage) {
    const prompt_tokens = prompts.reduce((a, p) => a + p.length, 0);
    const completion_tokens = choices.reduce((a, c) => a + c.tokens.length, 0);
    out.send({ ...head, choices: [], usage: { prompt_tokens, completion_tokens, total_tokens: prompt_tokens + completion_tokens } });
  }
  out.end();
}

/** Streams a chat completion: a role chunk opens each choice, then one content chunk per token. */
export async function streamChat(res: ServerResponse, r: ChatCompletionRequest, tok: TextTokenizer, prompt: Int32Array, run: Run): Promise<void> {
  const out = new EventStream(res);
  const head = { id: requestId('chatcmpl'), object: 'chat.completion.chunk', created: now(), model: r.model };
  const texts = new Map<number, TextDeltas>();
  const choices = await run((t) => {
    let deltas = texts.get(t.choice);
    if (!deltas) {
      texts.set(t.choice, (deltas = new TextDeltas(tok)));
      out.send({ ...head, choices: [{ index: t.choice, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }] });
    }
    out.send({
      ...head,
      choices: [
        {
          index: t.choice,
          delta: { content: deltas.push(t.token, t.finish !== null) },
          logprobs: r.logprobs ? { content: [chatTokenLogprob(tok, t.token, t.logprob, t.top)] } : null,
          finish_reason: t.finish,
          ...(r.return_token_ids ? { token_ids: [t.token] } : {}),
        },
      ],
    });
  });
  if (r.stream_options?.include_usage) {
    const completion_tokens = choices.reduce((a, c) => a + c.tokens.length, 0);
    out.send({ ...head, choices: [], usage: { prompt_tokens: prompt.length, completion_tokens, total_tokens: prompt.length + completion_tokens } });
  }
  out.end();
}
