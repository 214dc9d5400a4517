/**
 * What a call that must fail rejects with, checked to be a MemsvcError of the expected class. A
 * helper the tests share; must never start a server or make a call itself.
 */
import assert from "node:assert/strict";
import { MemsvcError } from "../src/index.js";

export async function rejection<E extends MemsvcError = MemsvcError>(promise: Promise<unknown>,
  Class: new (...a: never[]) => E = MemsvcError as unknown as new (...a: never[]) => E): Promise<E> {
  const error = await promise.then(() => undefined, (caught: unknown) => caught);
  assert.ok(error instanceof Class, `expected a ${Class.name}, got ${String(error)}`);
  return error;
}
