import { useCallback, useEffect, useState } from "react";
import { Bar, BarChart, CartesianGrid, ErrorBar, Legend, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import {
  Alert, Box, Button, Checkbox, Chip, Dialog, DialogContent, DialogTitle, FormControlLabel, FormGroup, Grid,
  LinearProgress, MenuItem, Stack, Switch, Table, TableBody, TableCell, TableHead, TableRow, TextField, Typography,
} from "@mui/material";
import { Title } from "react-admin";
import { Answer, getJSON, MODES, postJSON, uploadWithProgress, useModes } from "../api";
import { XRay } from "../chat/XRay";
import { RunCompare, rankText } from "./RunCompare";

interface Dataset { id: string; name: string; source: string; n_questions: number }
interface Run {
  id: string; dataset: string; params: Record<string, any>; status: string; progress: { done: number; total: number };
  error: string | null; created_at: string | null; results?: any;
  // a finished run's counts: question_split says which questions the retrieval metrics average over
  summary?: { n_questions: number; n_answerable: number; n_unanswerable: number; question_split: string } | null;
}
interface CI { mean: number | null; ci95: [number, number] | null; n: number }
interface Intervals { method: string; retrieval: Record<string, Record<string, CI>>; answers: Record<string, Record<string, CI>> }

// the provenance fields of generated gold pairs a run's questions can be filtered by
const PAIR_FACETS: [string, string][] = [["generator", "generator"], ["source_kind", "source"], ["answer_type", "answer type"], ["paraphrase", "paraphrase"]];

const f3 = (x: number | null | undefined) => (x === null || x === undefined ? "–" : x.toFixed(3));

/** A question fails in a mode when its evidence is not in the top 5 or, with answers, when the
 * answer is not answered-and-cited at a gold place (the run's own metrics). */
function failed(q: any, mode: string): boolean {
  const hit = q.retrieval?.[mode]?.metrics?.["hit@5"];
  const ac = q.answers?.[mode]?.metrics?.answered_cited?.value;
  return hit === 0 || ac === 0;
}

function RunView({ run, onXray, tag }: { run: Run; onXray: (question: string, mode: string) => void; tag?: string }) {
  const [iv, setIv] = useState<Intervals | null>(null);
  const [metric, setMetric] = useState("hit@5");
  const [onlyFailures, setOnlyFailures] = useState(false);
  // generated gold pairs carry their generator, source kind, answer type and paraphrase flag
  const [pairFilter, setPairFilter] = useState<Record<string, string>>({});
  const res = run.results;
  useEffect(() => {
    if (run.status === "done") getJSON<Intervals>(`/evaluate/${run.id}/intervals`).then(setIv).catch(() => setIv(null));
  }, [run.id, run.status]);
  if (!res) {
    return (
      <Box data-testid="run-progress">
        <Typography variant="body2">{run.dataset}: {run.status} {run.progress.done}/{run.progress.total}</Typography>
        <LinearProgress variant="determinate" value={run.progress.total ? (100 * run.progress.done) / run.progress.total : 0} />
        {run.error && <Alert severity="error">{run.error}</Alert>}
      </Box>
    );
  }
  const isAnswer = iv ? Object.values(iv.answers).some((m) => metric in m) : false;
  const src = iv ? (isAnswer ? iv.answers : iv.retrieval) : {};
  const chart = Object.entries(src).filter(([, m]) => m[metric]).map(([mode, m]) => {
    const c = m[metric];
    return { mode, value: c.mean, err: c.ci95 && c.mean !== null ? [c.mean - c.ci95[0], c.ci95[1] - c.mean] : [0, 0], lo: c.ci95?.[0], hi: c.ci95?.[1], n: c.n };
  });
  const metricNames = iv ? Array.from(new Set([...Object.values(iv.retrieval), ...Object.values(iv.answers)].flatMap((m) => Object.keys(m)))) : [];
  const modes: string[] = Object.keys(res.modes ?? {});
  const all: any[] = res.questions ?? [];
  const facets = PAIR_FACETS.map(([key, label]) => [key, label, Array.from(new Set(all.map((q) => q[key]).filter((v) => v !== undefined && v !== null).map(String))).sort()] as const)
    .filter(([, , values]) => values.length > 0);
  const questions: any[] = all
    .filter((q: any) => Object.entries(pairFilter).every(([k, v]) => !v || String(q[k]) === v))
    .filter((q: any) => !onlyFailures || modes.some((m) => failed(q, m)));
  const hit5 = (m: string) => {
    const xs = questions.map((q) => q.retrieval?.[m]?.metrics?.["hit@5"]).filter((x) => typeof x === "number");
    return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null;
  };
  return (
    <Box data-testid="run-results" data-run-id={run.id}>
      <Typography variant="subtitle2">{tag && <b>{tag}: </b>}{res.dataset?.name} · judge {res.judge} · answerer {res.answerer}
        {res.index && <span data-testid="run-index">{` · index version ${res.index.version} (${res.index.documents} documents, ${res.index.chunks} chunks${res.index.changed_during_run ? "; changed during the run" : ""})`}</span>}
      </Typography>
      <Typography variant="body2" data-testid="question-split">{run.summary?.question_split ?? `${res.dataset?.n_questions} questions`}</Typography>
      <Stack direction="row" spacing={1} alignItems="center" sx={{ my: 1 }}>
        <TextField select size="small" label="metric" value={metric} onChange={(e) => setMetric(e.target.value)} data-testid="metric">
          {metricNames.map((m) => <MenuItem key={m} value={m}>{m}</MenuItem>)}
        </TextField>
        <Typography variant="caption">95% intervals: {iv?.method}</Typography>
      </Stack>
      <Box sx={{ height: 220 }} data-testid="ci-chart">
        <ResponsiveContainer>
          <BarChart data={chart}>
            <CartesianGrid strokeDasharray="3 3" />
            <XAxis dataKey="mode" /><YAxis domain={[0, 1]} />
            <Tooltip formatter={(v, _n, p: any) => `${f3(Number(v))} [${f3(p.payload.lo)}, ${f3(p.payload.hi)}] n=${p.payload.n}`} />
            <Legend />
            <Bar dataKey="value" name={metric} fill="#1976d2" isAnimationActive={false}>
              <ErrorBar dataKey="err" width={8} stroke="#000" />
            </Bar>
          </BarChart>
        </ResponsiveContainer>
      </Box>
      <Table size="small" data-testid="ci-table">
        <TableHead><TableRow><TableCell>mode</TableCell><TableCell>{metric}</TableCell><TableCell>95% CI</TableCell><TableCell title="questions the metric averages over">n</TableCell></TableRow></TableHead>
        <TableBody>
          {chart.map((c) => (
            <TableRow key={c.mode} data-testid="ci-row"><TableCell>{c.mode}</TableCell><TableCell>{f3(c.value)}</TableCell>
              <TableCell>[{f3(c.lo)}, {f3(c.hi)}]</TableCell><TableCell>{c.n}</TableCell></TableRow>
          ))}
        </TableBody>
      </Table>
      <Typography variant="overline" display="block" sx={{ mt: 1 }}>Comparisons (paired bootstrap)</Typography>
      <Table size="small">
        <TableBody>
          {Object.entries(res.comparisons ?? {}).flatMap(([pair, ms]: [string, any]) => Object.entries(ms).map(([m, c]: [string, any]) => (
            <TableRow key={pair + m}>
              <TableCell>{pair}</TableCell><TableCell>{m}</TableCell>
              <TableCell>{f3(c.a)} vs {f3(c.b)}</TableCell><TableCell>diff {f3(c.diff)}</TableCell>
              <TableCell>CI [{f3(c.ci95?.[0])}, {f3(c.ci95?.[1])}]</TableCell>
            </TableRow>
          )))}
        </TableBody>
      </Table>
      {res.judge_control && (
        <Alert severity={!res.judge_control.n ? "info" : res.judge_control.all_failed ? "success" : "warning"} sx={{ mt: 1 }} data-testid="judge-control">
          Judge control ({res.judge_control.judge}): {res.judge_control.n
            ? `${res.judge_control.failed}/${res.judge_control.n} deliberately wrong answers failed${res.judge_control.all_failed ? " — the judge catches them" : " — the judge let some through"}`
            : "no control pairs in this run (a control needs two questions whose sources share no chunk)"}
        </Alert>
      )}
      {Object.keys(res.skipped_modes ?? {}).length > 0 && (
        <Alert severity="info" sx={{ mt: 1 }}>{Object.entries(res.skipped_modes).map(([m, r]) => `${m}: ${r}`).join("; ")}</Alert>
      )}
      <Stack direction="row" alignItems="center" sx={{ mt: 1 }}>
        <Typography variant="overline" sx={{ flex: 1 }}>Questions ({questions.length})</Typography>
        {facets.map(([key, label, values]) => (
          <TextField key={key} select size="small" label={label} value={pairFilter[key] ?? ""} sx={{ minWidth: 130, mr: 1 }}
            onChange={(e) => setPairFilter((f) => ({ ...f, [key]: e.target.value }))} data-testid={`filter-${key}`}>
            <MenuItem value="">all</MenuItem>
            {values.map((v) => <MenuItem key={v} value={v}>{v.replaceAll("_", " ")}</MenuItem>)}
          </TextField>
        ))}
        <FormControlLabel control={<Switch checked={onlyFailures} onChange={(e) => setOnlyFailures(e.target.checked)} data-testid="only-failures" />} label="failures only" />
      </Stack>
      {facets.length > 0 && (
        <Typography variant="caption" display="block" data-testid="filtered-hit5">
          shown: {questions.length} questions; hit@5 {modes.map((m) => `${m} ${f3(hit5(m))}`).join(", ")}
        </Typography>
      )}
      <Table size="small" data-testid="questions">
        <TableHead>
          <TableRow><TableCell>id</TableCell><TableCell>question</TableCell>{modes.map((m) => <TableCell key={m}>{m} rank</TableCell>)}</TableRow>
        </TableHead>
        <TableBody>
          {questions.map((q) => (
            <TableRow key={q.id} data-testid="question-row" data-failed={modes.some((m) => failed(q, m))}>
              <TableCell>{q.id}</TableCell>
              <TableCell sx={{ maxWidth: 380 }}>{q.question}{q.source_kind ? <Chip size="small" sx={{ ml: 1 }} label={`${q.source_kind.replaceAll("_", " ")}${q.paraphrase ? " · paraphrase" : ""}`} /> : null}</TableCell>
              {modes.map((m) => (
                <TableCell key={m}>
                  <Button size="small" color={failed(q, m) ? "error" : "primary"} onClick={() => onXray(q.question, m)}>
                    {rankText(q, m)}{q.answers?.[m] ? ` · ${q.answers[m].label}` : ""}
                  </Button>
                </TableCell>
              ))}
            </TableRow>
          ))}
        </TableBody>
      </Table>
    </Box>
  );
}

export function EvaluationPage() {
  const [datasets, setDatasets] = useState<Dataset[]>([]);
  const [runs, setRuns] = useState<Run[]>([]);
  const [dataset, setDataset] = useState("");
  const serverModes = useModes();
  // the modes the server can run, once it said which (the run's default); then as the user picks
  const [picked, setModes] = useState<string[] | null>(null);
  const modes = picked ?? serverModes?.available ?? [];
  const [answers, setAnswers] = useState(true);
  const [selected, setSelected] = useState<string[]>([]);
  const [details, setDetails] = useState<Record<string, Run>>({});
  const [error, setError] = useState<string | null>(null);
  const [xray, setXray] = useState<Answer | null>(null);

  const refresh = useCallback(async () => {
    try {
      setDatasets(await getJSON<Dataset[]>("/datasets"));
      setRuns(await getJSON<Run[]>("/evaluate"));
    } catch (e) {
      setError((e as Error).message);
    }
  }, []);
  useEffect(() => void refresh(), [refresh]);

  // poll the selected runs until they finish
  useEffect(() => {
    let stop = false;
    const tick = async () => {
      const out: Record<string, Run> = {};
      for (const id of selected) out[id] = await getJSON<Run>(`/evaluate/${id}`);
      if (stop) return;
      setDetails(out);
      if (Object.values(out).some((r) => r.status === "queued" || r.status === "running")) setTimeout(tick, 1000);
      else void refresh();
    };
    void tick();
    return () => { stop = true; };
  }, [selected, refresh]);

  const start = async () => {
    setError(null);
    try {
      const run = await postJSON<Run>("/evaluate", { dataset, modes, answers });
      setSelected([run.id]);
      void refresh();
    } catch (e) {
      setError((e as Error).message);
    }
  };
  const upload = async (f: File) => {
    const form = new FormData();
    form.append("file", f, f.name);
    try {
      const ds = await uploadWithProgress<Dataset>("/datasets", form, () => undefined);
      setDataset(ds.name);
      void refresh();
    } catch (e) {
      setError((e as Error).message);
    }
  };
  const openXray = async (question: string, mode: string, run?: Run) => {
    const p = run?.params ?? {};
    // asked again with the run's mode, top_k, strategy and scope; top_k counts the retrieved
    // chunks, not the neighbours added after them
    const out = await postJSON<Answer>("/query", {
      question, mode, top_k: p.top_k ?? undefined, strategy: p.strategy ?? undefined,
      knowledge_base: p.knowledge_base ?? undefined, doc_names: p.doc_names ?? [],
    });
    setXray({ ...out, top_k: p.top_k ?? (out.retrieved.filter((r) => !r.neighbor_of).length || undefined) });
  };

  // the picked runs, earlier run first (A), whatever order they were picked in
  const shown = selected.map((id) => details[id]).filter((r): r is Run => !!r)
    .sort((x, y) => (Date.parse(x.created_at ?? "") || 0) - (Date.parse(y.created_at ?? "") || 0));
  return (
    <Box sx={{ p: 2 }}>
      <Title title="Evaluation" />
      {error && <Alert severity="error" data-testid="eval-error">{error}</Alert>}
      <Stack direction="row" spacing={2} alignItems="center" flexWrap="wrap" sx={{ mb: 2 }}>
        <TextField select size="small" label="dataset" value={dataset} onChange={(e) => setDataset(e.target.value)} sx={{ minWidth: 240 }} data-testid="dataset">
          {datasets.map((d) => <MenuItem key={d.id} value={d.name}>{d.name} ({d.source}, {d.n_questions})</MenuItem>)}
        </TextField>
        <Button component="label" variant="outlined" size="small">
          Upload JSONL<input hidden type="file" accept=".jsonl,application/json" data-testid="dataset-file" onChange={(e) => e.target.files?.[0] && void upload(e.target.files[0])} />
        </Button>
        <FormGroup row>
          {MODES.map((m) => {
            const why = serverModes?.unavailable[m];
            return (
              <FormControlLabel key={m} label={why ? `${m} (unavailable)` : m} title={why} disabled={!!why} data-testid={`mode-${m}`}
                control={<Checkbox size="small" checked={modes.includes(m)}
                  onChange={(e) => setModes(e.target.checked ? [...modes, m] : modes.filter((x) => x !== m))} />} />
            );
          })}
        </FormGroup>
        <FormControlLabel control={<Switch checked={answers} onChange={(e) => setAnswers(e.target.checked)} />} label="answers" />
        <Button variant="contained" disabled={!dataset || !modes.length} onClick={() => void start()} data-testid="start-eval">Start run</Button>
      </Stack>
      <Typography variant="overline">Runs (pick one, or two to compare)</Typography>
      <Table size="small" data-testid="runs">
        <TableBody>
          {runs.map((listed) => details[listed.id] ?? listed).map((r) => (
            // a picked run's row shows what its polling reads, not the list fetched when it started
            <TableRow key={r.id} hover selected={selected.includes(r.id)} sx={{ cursor: "pointer" }} data-testid="run-row" data-run-id={r.id}
              onClick={() => setSelected((xs) => (xs.includes(r.id) ? xs.filter((x) => x !== r.id) : [...xs.slice(-1), r.id]))}>
              <TableCell>{r.created_at?.slice(0, 19)}</TableCell><TableCell>{r.dataset}</TableCell>
              <TableCell><Chip size="small" label={r.status} /></TableCell>
              <TableCell>{r.progress.done}/{r.progress.total}</TableCell>
              <TableCell>{(r.params.modes ?? []).join(", ")}{r.params.answers === false ? " (retrieval only)" : ""}</TableCell>
            </TableRow>
          ))}
        </TableBody>
      </Table>
      {shown.length === 2 && <RunCompare a={shown[0]} b={shown[1]} />}
      <Grid container spacing={2} sx={{ mt: 1 }}>
        {shown.map((run, i) => (
          <Grid key={run.id} size={{ xs: 12, md: shown.length > 1 ? 6 : 12 }}>
            <RunView run={run} tag={shown.length > 1 ? (i ? "B" : "A") : undefined} onXray={(q, m) => void openXray(q, m, run)} />
          </Grid>
        ))}
      </Grid>
      <Dialog open={!!xray} onClose={() => setXray(null)} maxWidth="lg" fullWidth>
        <DialogTitle>{xray?.question}</DialogTitle>
        <DialogContent>{xray && <>
          <Typography variant="caption" color="text.secondary" data-testid="eval-xray-live" sx={{ display: "block", mb: 1 }}>
            Asked again now with the run's mode, top_k and scope: answer and ranks differ from the run's when documents or settings changed since.
          </Typography>
          <Typography variant="body2" sx={{ mb: 1 }}>{xray.answer}</Typography><XRay run={xray} /></>}</DialogContent>
      </Dialog>
    </Box>
  );
}
