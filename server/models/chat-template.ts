/**
 * A Hugging Face chat template (the Jinja source in `tokenizer_config.json#chat_template`, or
 * `chat_template.jinja` beside it) rendered with `@huggingface/jinja`, the engine transformers.js
 * uses, so a conversation becomes exactly the text the instruction-tuned model was trained on.
 *
 * The render context is the one transformers' `apply_chat_template` builds: `messages`,
 * `add_generation_prompt`, the tokenizer's special tokens by name (`bos_token`, `eos_token`, ...),
 * `tools` when given, plus template switches such as Qwen3's `enable_thinking` (which only takes
 * effect when passed; left out, Qwen3's template lets the model think, as transformers does).
 * Rendering text and tokenizing it are separate steps: the caller encodes the rendered text with
 * `add_special_tokens = false`, because the template already wrote any BOS.
 */
import { Template } from '@huggingface/jinja';
import { z } from 'zod';

/** Roles a chat template understands ('tool' is a tool's response, as in transformers). */
export const chatMessageRoles = ['system', 'user', 'assistant', 'tool'] as const;

export const chatMessageSchema = z
  .object({
    /** Who speaks; templates lay out each role differently. */
    role: z.enum(chatMessageRoles),
    /** The message text. */
    content: z.string(),
  })
  .strict();
export type ChatMessage = z.output<typeof chatMessageSchema>;

export interface ChatRenderOptions {
  /** End with the opener of an assistant turn, ready for the model's response. Default true. */
  readonly addGenerationPrompt?: boolean;
  /**
   * Qwen3's switch: false writes an empty `<think></think>` block into the generation prompt so
   * the model answers directly (the reference's Qwen3 runs set it false). Undefined: not passed.
   */
  readonly enableThinking?: boolean;
  /** Tool (function) schemas for templates that describe tools (JSON objects, as in transformers). */
  readonly tools?: readonly unknown[];
}

/** The special tokens a template may reference by name, as strings (null when the tokenizer has none). */
export interface TemplateSpecialTokens {
  readonly bos_token: string | null;
  readonly eos_token: string | null;
  readonly pad_token: string | null;
  readonly unk_token: string | null;
}

/** A parsed chat template. Construction parses the Jinja source and fails on a syntax error, naming `source`. */
export class ChatTemplate {
  readonly source: string;
  readonly text: string;
  readonly #template: Template;
  readonly #specials: TemplateSpecialTokens;

  constructor(text: string, specials: TemplateSpecialTokens, source: string) {
    this.source = source;
    this.text = text;
    this.#specials = specials;
    try {
      this.#template = new Template(text);
    } catch (e) {
      throw new Error(`${source}: the chat template does not parse: ${(e as Error).message}`, { cause: e });
    }
  }

  /** Renders a conversation to text. Errors (a template's `raise_exception`, a bad message) name the source. */
  render(messages: readonly ChatMessage[], options: ChatRenderOptions = {}): string {
    messages.forEach((m, i) => {
      const r = chatMessageSchema.safeParse(m);
      if (!r.success) throw new Error(`message ${i}: ${r.error.issues.map((x) => `${x.path.join('.') || '(message)'}: ${x.message}`).join('; ')}`);
    });
    const context: Record<string, unknown> = {
      // Fresh plain objects: the template must not see (or mutate) the caller's.
      messages: messages.map((m) => ({ role: m.role, content: m.content })),
      add_generation_prompt: options.addGenerationPrompt ?? true,
      ...this.#specials,
    };
    if (options.enableThinking !== undefined) context.enable_thinking = options.enableThinking;
    if (options.tools !== undefined) context.tools = options.tools;
    try {
      return this.#template.render(context);
    } catch (e) {
      throw new Error(`${this.source}: rendering the chat template failed: ${(e as Error).message}`, { cause: e });
    }
  }

  /**
   * The text the template writes after an assistant message's content, to the end of a
   * conversation that goes on with one more user turn: for Qwen it starts `<|im_end|>\n`, for
   * Llama 3 `<|eot_id|>`. The tokenizer reads the turn's end token off its start, so the stop token
   * follows the template rather than a table of model families. Null when the template does not
   * echo the assistant's text (it rewrites it).
   */
  textAfterAssistant(): string | null {
    const marker = 'TROUPE_ANSWER_MARKER';
    const text = this.render(
      [
        { role: 'user', content: 'Q' },
        { role: 'assistant', content: marker },
        { role: 'user', content: 'Q' },
      ],
      { addGenerationPrompt: false },
    );
    const at = text.lastIndexOf(marker);
    return at < 0 ? null : text.slice(at + marker.length);
  }
}
