/**
 * How an adapter stores one framework message as one memsvc message: its text once, as `content`,
 * and the rest of it in `payloadJson`, strict JSON, from which it is read back. The envelope is the
 * Python client's (`memsvc_client.payloads`), with spans counted in code points in both:
 *
 *     {"memsvc": 1, "text": [[start, end, path], ...], "item": ITEM}
 *
 * ITEM is the message as JSON with every string that `content` carries replaced by null;
 * `content` from code point `start` to `end` goes back at `path`. An item holding lone surrogates,
 * which UTF-8 cannot encode, travels as its JSON text instead (`"item_json"`). Text with nothing
 * visible (only whitespace, control or format characters) stays whole in the item, and `content`
 * is the adapter's stand-in; text with lone surrogates goes to `content` with U+FFFD in their place.
 * Must never decide what a message's text or role is: each adapter does.
 */

/** Where a string sits in a message: object keys and array indices, outermost first. */
export type Path = readonly (string | number)[];

/** A piece of `content`: text, and where it comes from in the message (undefined: the adapter's own). */
export type Piece = readonly [string, Path | undefined];

const LONE_SURROGATES = /\p{Cs}/gu;
/** What JSON.stringify writes for a lone surrogate (and, harmlessly, for an escaped "\\udXXX" text). */
const ESCAPED_SURROGATE = /\\u[dD][89a-fA-F][0-9a-fA-F]{2}/;

/** Whether the server takes `text` as content: it holds a letter, digit, punctuation mark or symbol. */
export function visible(text: string): boolean {
  return /[\p{L}\p{N}\p{P}\p{S}]/u.test(text);
}

/** `content` and `payloadJson` for `message` (any JSON value): the pieces joined, or `standIn`. */
export function pack(message: unknown, pieces: readonly Piece[], standIn: string):
  { content: string; payloadJson: string } {
  const item: unknown = JSON.parse(JSON.stringify(message));
  const parts: string[] = [];
  let spans: [number, number, Path][] = [];
  let at = 0;
  for (const [text, path] of pieces) {
    const clean = text.replace(LONE_SURROGATES, "\ufffd");
    if (path !== undefined && clean === text) {
      spans.push([at, at + codePoints(text), path]);
    }
    parts.push(clean);
    at += codePoints(clean);
  }
  let content = parts.join("");
  if (!visible(content)) {
    content = standIn.replace(LONE_SURROGATES, "\ufffd");
    spans = [];
  }
  for (const [, , path] of spans) {
    put(item, path, null);
  }
  const head = `{"memsvc":1,"text":${JSON.stringify(spans)}`;
  const strict = JSON.stringify(item);
  const payloadJson = ESCAPED_SURROGATE.test(strict) ? `${head},"item_json":${JSON.stringify(strict)}}`
    : `${head},"item":${strict}}`;
  return { content, payloadJson };
}

/** The message `pack` stored (a payload without the envelope is the message itself). */
export function unpack(content: string, payloadJson: string): unknown {
  const stored = JSON.parse(payloadJson) as Record<string, unknown> | null;
  if (stored === null || typeof stored !== "object" || stored.memsvc !== 1) {
    return stored;
  }
  const item = "item" in stored ? stored.item : JSON.parse(stored.item_json as string);
  const characters = Array.from(content);
  for (const [start, end, path] of stored.text as [number, number, Path][]) {
    put(item, path, characters.slice(start, end).join(""));
  }
  return item;
}

function codePoints(text: string): number {
  let count = 0;
  for (const _ of text) {
    count += 1;
  }
  return count;
}

function put(item: unknown, path: Path, value: unknown): void {
  let node = item as Record<string | number, unknown>;
  for (const step of path.slice(0, -1)) {
    node = node[step] as Record<string | number, unknown>;
  }
  node[path[path.length - 1]] = value;
}
