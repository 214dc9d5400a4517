/**
 * Plain values to request messages, driven by the generated descriptors: an enum field takes
 * its lower-case name ("keyword" for Match.KEYWORD; the full "MATCH_KEYWORD" too) or its number,
 * nested messages and lists are walked. A field the contract gains needs no code here. Must
 * never make calls.
 */
import type { DescEnum, DescMessage, MessageInitShape } from "@bufbuild/protobuf";

/** An enum value by name: "keyword" for Match.KEYWORD ("" or UNSPECIFIED are not names). */
export type Name<E extends Record<string, string | number>> = Lowercase<Exclude<Extract<keyof E, string>,
  "UNSPECIFIED">>;

/** "" for *_UNSPECIFIED, else the value's lower-case name without the enum's prefix. */
export function enumLabel(desc: DescEnum, value: number): string {
  const found = desc.values.find((v) => v.number === value);
  if (found === undefined) return `unknown_${value}`;
  return found.name.endsWith("_UNSPECIFIED") ? "" : found.localName.toLowerCase();
}

export function enumNumber(desc: DescEnum, value: unknown, where: string): number {
  if (typeof value === "number") return value;
  const choices = desc.values.map((v) => enumLabel(desc, v.number)).filter((label) => label !== "");
  if (typeof value !== "string") {
    throw new TypeError(`${where} must be one of ${choices.join(", ")}, got ${JSON.stringify(value)}`);
  }
  if (value === "") return 0;
  const wanted = value.trim().toUpperCase().replaceAll("-", "_");
  const found = desc.values.find((v) => v.localName === wanted || v.name === wanted);
  if (found === undefined) {
    throw new RangeError(`${where} must be one of ${choices.join(", ")}, got ${JSON.stringify(value)}`);
  }
  return found.number;
}

/** `values` with every enum name turned into its number, for `create(schema, ...)`. */
export function named<D extends DescMessage>(schema: D, values: Record<string, unknown>): MessageInitShape<D> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(values)) {
    if (value === undefined) continue;
    const field = schema.fields.find((f) => f.localName === key);
    if (field === undefined) {
      const known = schema.fields.map((f) => f.localName).join(", ");
      throw new TypeError(`${schema.name} has no field ${JSON.stringify(key)} (fields: ${known})`);
    }
    const where = `${schema.name}.${key}`;
    if (field.fieldKind === "enum") {
      out[key] = enumNumber(field.enum, value, where);
    } else if (field.fieldKind === "message" && isPlain(value)) {
      out[key] = named(field.message, value);
    } else if (field.fieldKind === "list" && field.listKind === "message" && Array.isArray(value)) {
      out[key] = value.map((item: unknown) => (isPlain(item) ? named(field.message, item) : item));
    } else if (field.fieldKind === "list" && field.listKind === "enum" && Array.isArray(value)) {
      out[key] = value.map((item: unknown) => enumNumber(field.enum, item, where));
    } else {
      out[key] = value;
    }
  }
  return out as MessageInitShape<D>;
}

function isPlain(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !("$typeName" in value);
}
