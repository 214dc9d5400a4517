/** How numbers from the contract read on the page: local times, sizes, counts. */

const pad = (n: number): string => String(n).padStart(2, "0");

/** UTC Unix nanoseconds as local "YYYY-MM-DD HH:MM:SS"; "" for 0 (unset). */
export function time(unixNano: bigint): string {
  if (unixNano === 0n) {
    return "";
  }
  const at = new Date(Number(unixNano / 1_000_000n));
  return `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())} ` +
    `${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}`;
}

export function bytes(size: bigint): string {
  const n = Number(size);
  if (n < 1024) {
    return `${n} B`;
  }
  const units = ["KiB", "MiB", "GiB"];
  let value = n / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

export function plural(count: number | bigint, one: string, many = `${one}s`): string {
  return `${count} ${count === 1 || count === 1n ? one : many}`;
}
