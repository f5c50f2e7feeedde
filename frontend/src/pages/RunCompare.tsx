import { useEffect, useState } from "react";
import {
  Alert, Box, Chip, FormControlLabel, MenuItem, Paper, Stack, Switch, Table, TableBody, TableCell, TableHead, TableRow,
  TextField, Typography,
} from "@mui/material";
import { getJSON } from "../api";

/** The parts of a run (GET /evaluate/{id}) and of its intervals (GET /evaluate/{id}/intervals) compared here. */
export interface ComparedRun {
  id: string; dataset: string; status: string; created_at: string | null; results?: any;
}
interface CI { mean: number | null; ci95: [number, number] | null; n: number }
interface Intervals { retrieval: Record<string, Record<string, CI>>; answers: Record<string, Record<string, CI>> }

const f3 = (x: number | null | undefined) => (x === null || x === undefined ? "–" : x.toFixed(3));
const signed = (x: number | null) => (x === null ? "–" : `${x > 0 ? "+" : ""}${x.toFixed(3)}`);
const ciOf = (iv: Intervals | null, mode: string, metric: string): CI | undefined =>
  iv?.retrieval[mode]?.[metric] ?? iv?.answers[mode]?.[metric];

/** A question's evidence rank in one mode: "miss" when retrieval did not find it in the top k,
 * "–" for a must-refuse question (it has no evidence to find, so no retrieval record). */
export function rankText(q: any, mode: string): string {
  return q?.ranks?.[mode] != null ? String(q.ranks[mode]) : q?.retrieval?.[mode] ? "miss" : "–";
}

/** What a question shows in one mode of one run: its evidence rank (null = not in the top k) and
 * the answer label (when the run scored answers). */
function outcome(q: any, mode: string): { rank: number | null; label: string | null; text: string } {
  return { rank: q?.ranks?.[mode] ?? null, label: q?.answers?.[mode]?.label ?? null, text: rankText(q, mode) };
}
const show = (o: { text: string; label: string | null }) => `${o.text}${o.label ? ` · ${o.label}` : ""}`;

/** What differed in the knowledge base the two runs searched (`results.index`), or null: runs on
 * different index versions had other candidates and other BM25 statistics. */
export function indexNote(a: ComparedRun, b: ComparedRun): string | null {
  const x = a.results?.index, y = b.results?.index;
  const during = [x?.changed_during_run && "A", y?.changed_during_run && "B"].filter(Boolean);
  const parts: string[] = [];
  if (x && y && x.version !== y.version) {
    parts.push(`The knowledge base changed between the runs (index version ${x.version} → ${y.version}: `
      + `${x.documents} → ${y.documents} documents, ${x.chunks} → ${y.chunks} chunks), so retrieval had other `
      + "candidates and BM25 other statistics: not every difference comes from the runs' settings.");
  }
  if (during.length) parts.push(`The knowledge base changed while run ${during.join(" and ")} was going.`);
  return parts.length ? parts.join(" ") : null;
}

/** Two finished runs compared: per mode, a metric's mean with each run's own 95% interval and the
 * difference of the means (later run minus earlier run); per question (matched by id), each
 * mode's evidence rank and answer label in both runs, marked "changed" when any of them differs.
 * `a` is the earlier run, `b` the later one. */
export function RunCompare({ a, b }: { a: ComparedRun; b: ComparedRun }) {
  const [ivA, setIvA] = useState<Intervals | null>(null);
  const [ivB, setIvB] = useState<Intervals | null>(null);
  const [metric, setMetric] = useState("mrr");
  const [onlyChanged, setOnlyChanged] = useState(false);
  const ready = a.status === "done" && b.status === "done" && a.results && b.results;
  useEffect(() => {
    setIvA(null);
    setIvB(null);
    if (!ready) return;
    let stop = false;
    void Promise.all([getJSON<Intervals>(`/evaluate/${a.id}/intervals`), getJSON<Intervals>(`/evaluate/${b.id}/intervals`)])
      .then(([x, y]) => { if (!stop) { setIvA(x); setIvB(y); } })
      .catch(() => undefined);
    return () => { stop = true; };
  }, [a.id, b.id, ready]);
  if (!ready) {
    return <Alert severity="info" sx={{ mt: 1 }} data-testid="run-compare-waiting">The comparison appears when both runs are done.</Alert>;
  }
  const modesA = Object.keys(a.results.modes ?? {});
  const modesB = new Set(Object.keys(b.results.modes ?? {}));
  const modes = modesA.filter((m) => modesB.has(m));
  const metrics = ivA && ivB ? Array.from(new Set(modes.flatMap((m) => [
    ...Object.keys(ivA.retrieval[m] ?? {}), ...Object.keys(ivA.answers[m] ?? {}),
  ].filter((k) => ciOf(ivB, m, k))))) : [];
  const qa: any[] = a.results.questions ?? [];
  const qb = new Map<string, any>((b.results.questions ?? []).map((q: any) => [q.id, q]));
  const idsA = new Set(qa.map((q) => q.id));
  const rows = [
    ...qa.map((q) => ({ id: q.id as string, question: q.question as string, x: q, y: qb.get(q.id) })),
    ...(b.results.questions ?? []).filter((q: any) => !idsA.has(q.id)).map((q: any) => ({ id: q.id, question: q.question, x: undefined, y: q })),
  ].map((r) => {
    const changed = !r.x || !r.y || modes.some((m) => show(outcome(r.x, m)) !== show(outcome(r.y, m)));
    return { ...r, changed };
  });
  const nChanged = rows.filter((r) => r.changed).length;
  const changedIndex = indexNote(a, b);
  return (
    <Paper variant="outlined" sx={{ p: 1.5, mt: 1 }} data-testid="run-compare" data-run-a={a.id} data-run-b={b.id}>
      <Typography variant="overline" display="block">Comparison: A = {a.dataset} · {a.created_at?.slice(0, 19)} vs B = {b.dataset} · {b.created_at?.slice(0, 19)}</Typography>
      {a.dataset !== b.dataset && <Alert severity="warning" sx={{ my: 1 }}>Different datasets: questions are matched by id.</Alert>}
      {changedIndex && <Alert severity="warning" sx={{ my: 1 }} data-testid="compare-index-changed">{changedIndex}</Alert>}
      {modes.length === 0 && <Alert severity="warning" sx={{ my: 1 }}>The runs share no mode.</Alert>}
      <Stack direction="row" spacing={1} alignItems="center" sx={{ my: 1 }}>
        <TextField select size="small" label="metric" value={metrics.includes(metric) ? metric : ""} onChange={(e) => setMetric(e.target.value)}
          data-testid="compare-metric" sx={{ minWidth: 200 }}>
          {metrics.map((m) => <MenuItem key={m} value={m}>{m}</MenuItem>)}
        </TextField>
        <Typography variant="caption">each run's mean with its own 95% interval; B − A is the difference of the means</Typography>
      </Stack>
      <Table size="small" data-testid="compare-table">
        <TableHead><TableRow>
          <TableCell>mode</TableCell><TableCell>A {metric}</TableCell><TableCell>A 95% CI</TableCell>
          <TableCell>B {metric}</TableCell><TableCell>B 95% CI</TableCell><TableCell>B − A</TableCell>
        </TableRow></TableHead>
        <TableBody>
          {modes.map((m) => {
            const x = ciOf(ivA, m, metric), y = ciOf(ivB, m, metric);
            const diff = x?.mean != null && y?.mean != null ? y.mean - x.mean : null;
            return (
              <TableRow key={m} data-testid="compare-row" data-mode={m}>
                <TableCell>{m}</TableCell>
                <TableCell data-testid="a-mean">{f3(x?.mean)}</TableCell>
                <TableCell data-testid="a-ci">[{f3(x?.ci95?.[0])}, {f3(x?.ci95?.[1])}]</TableCell>
                <TableCell data-testid="b-mean">{f3(y?.mean)}</TableCell>
                <TableCell data-testid="b-ci">[{f3(y?.ci95?.[0])}, {f3(y?.ci95?.[1])}]</TableCell>
                <TableCell data-testid="diff" sx={{ fontWeight: diff ? 600 : undefined, color: diff ? (diff > 0 ? "success.main" : "error.main") : undefined }}>
                  {signed(diff)}
                </TableCell>
              </TableRow>
            );
          })}
        </TableBody>
      </Table>
      <Stack direction="row" alignItems="center" sx={{ mt: 1 }}>
        <Typography variant="overline" sx={{ flex: 1 }} data-testid="compare-changed-count">Questions changed: {nChanged} of {rows.length}</Typography>
        <FormControlLabel control={<Switch checked={onlyChanged} onChange={(e) => setOnlyChanged(e.target.checked)} data-testid="only-changed" />} label="changed only" />
      </Stack>
      <Box sx={{ maxHeight: 420, overflow: "auto" }}>
        <Table size="small" stickyHeader data-testid="compare-questions">
          <TableHead><TableRow>
            <TableCell>id</TableCell><TableCell>question</TableCell>
            {modes.map((m) => <TableCell key={m}>{m}: A → B</TableCell>)}<TableCell />
          </TableRow></TableHead>
          <TableBody>
            {rows.filter((r) => !onlyChanged || r.changed).map((r) => (
              <TableRow key={r.id} data-testid="compare-question" data-id={r.id} data-changed={r.changed}
                sx={r.changed ? { bgcolor: "action.hover" } : undefined}>
                <TableCell>{r.id}</TableCell>
                <TableCell sx={{ maxWidth: 320 }}>{r.question}</TableCell>
                {modes.map((m) => {
                  const x = r.x ? show(outcome(r.x, m)) : "–", y = r.y ? show(outcome(r.y, m)) : "–";
                  return <TableCell key={m} data-testid="compare-cell" data-mode={m} sx={{ fontWeight: x !== y ? 600 : undefined }}>{x} → {y}</TableCell>;
                })}
                <TableCell>{r.changed && <Chip size="small" color="warning" label={!r.x ? "only in B" : !r.y ? "only in A" : "changed"} />}</TableCell>
              </TableRow>
            ))}
          </TableBody>
        </Table>
      </Box>
    </Paper>
  );
}
