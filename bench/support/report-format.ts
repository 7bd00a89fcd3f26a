/** Text-table helpers shared by the benches' reports. */

export function table(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: readonly string[]): string => cells.map((c, i) => c.padStart(widths[i]!)).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)];
}

export function percent(x: number | undefined): string {
  return x === undefined || !Number.isFinite(x) ? '—' : `${(x * 100).toFixed(0)} %`;
}

export function count(x: number): string {
  return Math.round(x).toLocaleString('en-US');
}

export function ms(x: number): string {
  return Number.isFinite(x) ? x.toFixed(1) : '—';
}

export function mib(bytes: number | undefined): string {
  return bytes === undefined ? '—' : `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

export function round2(x: number): number {
  return Math.round(x * 100) / 100;
}

export function intEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0) throw new Error(`${name} must be a positive integer, got "${raw}"`);
  return value;
}
