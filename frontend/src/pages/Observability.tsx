import { useCallback, useEffect, useState } from "react";
import { Bar, BarChart, CartesianGrid, ComposedChart, Legend, Line, LineChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import {
  Alert, Box, Button, Card, CardContent, Chip, Grid, MenuItem, Stack, Table, TableBody, TableCell, TableHead,
  TableRow, TextField, Typography,
} from "@mui/material";
import { Title } from "react-admin";
import { getJSON } from "../api";

interface Pct { p50: number | null; p95: number | null; p99: number | null; n: number }
interface Summary {
  count: number; errors: number; error_rate: number | null; client_disconnects?: number; client_errors?: number; cache_hits: number; cache_hit_rate: number | null;
  latency_ms: Record<string, Pct>; cost_usd: { total: number; mean: number | null };
  tokens: { prompt: number; completion: number; total: number };
}
/** What a group without a key holds (its rows carry NULL in the grouped column). */
const NO_KEY: Record<string, string> = {
  model: "requests refused before they ran (validation, limits): no model was called",
  label: "requests without an answer: /search, refused or failed ones",
  mode: "requests logged without a retrieval mode",
  endpoint: "requests logged without an endpoint",
};
interface Metrics { overall: Summary; groups: ({ key: string | null } & Summary)[]; telemetry?: Record<string, unknown> }
interface Health { status: string; parts: Record<string, { status: string; latency_ms: number; [k: string]: unknown }> }

const WINDOWS: Record<string, number> = { "15 min": 15, "1 hour": 60, "6 hours": 360, "24 hours": 1440, "7 days": 10080 };
const BUCKETS = 12;
const pct = (x: number | null | undefined) => (x === null || x === undefined ? "–" : `${(x * 100).toFixed(1)}%`);
const ms = (x: number | null | undefined) => (x === null || x === undefined ? "–" : `${x.toFixed(1)} ms`);
// "184.9 / 244.8 ms": two latencies under one unit, so the pair fits a tile on one line
const pair = (a: number | null | undefined, b: number | null | undefined) =>
  a === null || a === undefined || b === null || b === undefined ? `${ms(a)} / ${ms(b)}` : `${a.toFixed(1)} / ${b.toFixed(1)} ms`;

function Tile({ label, value, testid, note }: { label: string; value: string; testid?: string; note?: string }) {
  return (
    <Card variant="outlined" sx={{ height: "100%" }}>
      <CardContent sx={{ py: 1, "&:last-child": { pb: 1 } }}>
        <Typography variant="caption">{label}</Typography>
        <Typography variant="h6" data-testid={testid}>{value}</Typography>
        {note && <Typography variant="caption" color="text.secondary" display="block">{note}</Typography>}
      </CardContent>
    </Card>
  );
}

/** Observability: everything comes from GET /metrics (one call for the window, one per time
 * bucket for the series) and GET /health; nothing is computed here but the bucket bounds. */
/** What the error rate leaves out: requests whose client left, and requests rejected as invalid (4xx). */
function notErrors(o: Summary): string | undefined {
  const apart = [
    o.client_disconnects ? `${o.client_disconnects} client disconnect(s)` : "",
    o.client_errors ? `${o.client_errors} rejected request(s) (4xx)` : "",
  ].filter(Boolean);
  return apart.length ? `${apart.join(", ")}: not errors` : undefined;
}

export function ObservabilityPage() {
  const [windowName, setWindowName] = useState("1 hour");
  const [groupBy, setGroupBy] = useState("mode");
  const [m, setM] = useState<Metrics | null>(null);
  const [series, setSeries] = useState<Record<string, number | string | null>[]>([]);
  const [health, setHealth] = useState<Health | null>(null);
  const [error, setError] = useState<string | null>(null);

  const load = useCallback(async () => {
    setError(null);
    const minutes = WINDOWS[windowName];
    const until = new Date(Date.now() + 1000);
    const since = new Date(until.getTime() - minutes * 60_000);
    try {
      const q = new URLSearchParams({ since: since.toISOString(), until: until.toISOString(), group_by: groupBy });
      setM(await getJSON<Metrics>(`/metrics?${q}`));
      const step = (until.getTime() - since.getTime()) / BUCKETS;
      const buckets = await Promise.all(Array.from({ length: BUCKETS }, async (_, i) => {
        const a = new Date(since.getTime() + i * step), b = new Date(since.getTime() + (i + 1) * step);
        const r = await getJSON<Metrics>(`/metrics?${new URLSearchParams({ since: a.toISOString(), until: b.toISOString() })}`);
        const t = r.overall.latency_ms.total ?? ({} as Pct);
        return {
          t: b.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }), count: r.overall.count,
          p50: t.p50, p95: t.p95, p99: t.p99, error_rate: r.overall.error_rate, errors: r.overall.errors,
          rejected: r.overall.client_errors ?? 0, cost: r.overall.cost_usd.total,
        };
      }));
      setSeries(buckets);
    } catch (e) {
      setError((e as Error).message);
    }
    getJSON<Health>("/health").then(setHealth).catch(async () => {
      const r = await fetch("/health"); // 503 still carries the parts
      setHealth(await r.json());
    });
  }, [windowName, groupBy]);
  useEffect(() => void load(), [load]);

  const o = m?.overall;
  const stages = o ? Object.entries(o.latency_ms).filter(([, v]) => v.n > 0).map(([k, v]) => ({ stage: k, ...v })) : [];
  return (
    <Box sx={{ p: 2 }}>
      <Title title="Observability" />
      <Stack direction="row" spacing={1} sx={{ mb: 2 }} alignItems="center">
        <TextField select size="small" label="window" value={windowName} onChange={(e) => setWindowName(e.target.value)} data-testid="window">
          {Object.keys(WINDOWS).map((w) => <MenuItem key={w} value={w}>last {w}</MenuItem>)}
        </TextField>
        <TextField select size="small" label="group by" value={groupBy} onChange={(e) => setGroupBy(e.target.value)}>
          {["mode", "model", "label", "endpoint"].map((g) => <MenuItem key={g} value={g}>{g}</MenuItem>)}
        </TextField>
        <Button onClick={() => void load()} data-testid="refresh">Refresh</Button>
      </Stack>
      {error && <Alert severity="error">{error}</Alert>}
      {o && (
        <Grid container spacing={1} sx={{ mb: 2 }}>
          <Grid size={{ xs: 6, md: 2 }}><Tile label="queries" value={String(o.count)} testid="obs-count" /></Grid>
          <Grid size={{ xs: 6, md: 2 }}><Tile label="error rate" value={pct(o.error_rate)} testid="obs-error-rate"
            note={notErrors(o)} /></Grid>
          <Grid size={{ xs: 6, md: 2 }}><Tile label="cache-hit rate" value={pct(o.cache_hit_rate)} testid="obs-cache" /></Grid>
          <Grid size={{ xs: 6, md: 2 }}><Tile label="P50 / P95 total" value={pair(o.latency_ms.total?.p50, o.latency_ms.total?.p95)} testid="obs-p50" /></Grid>
          <Grid size={{ xs: 6, md: 2 }}><Tile label="P99 total" value={ms(o.latency_ms.total?.p99)} /></Grid>
          <Grid size={{ xs: 6, md: 2 }}><Tile label="cost / tokens" value={`$${o.cost_usd.total.toFixed(4)} / ${o.tokens.total}`} testid="obs-cost" /></Grid>
        </Grid>
      )}
      <Grid container spacing={2}>
        <Grid size={{ xs: 12, md: 6 }}>
          <Typography variant="overline">Total latency over time (P50 / P95 / P99, ms)</Typography>
          <Box sx={{ height: 220 }}>
            <ResponsiveContainer>
              <LineChart data={series}>
                <CartesianGrid strokeDasharray="3 3" />
                <XAxis dataKey="t" /><YAxis /><Tooltip /><Legend />
                <Line dataKey="p50" stroke="#1976d2" isAnimationActive={false} connectNulls />
                <Line dataKey="p95" stroke="#ed6c02" isAnimationActive={false} connectNulls />
                <Line dataKey="p99" stroke="#d32f2f" isAnimationActive={false} connectNulls />
              </LineChart>
            </ResponsiveContainer>
          </Box>
        </Grid>
        <Grid size={{ xs: 12, md: 6 }}>
          <Typography variant="overline">Queries, errors and cost over time</Typography>
          <Box sx={{ height: 220 }}>
            <ResponsiveContainer>
              <ComposedChart data={series}>
                <CartesianGrid strokeDasharray="3 3" />
                <XAxis dataKey="t" /><YAxis yAxisId="n" /><YAxis yAxisId="c" orientation="right" /><Tooltip /><Legend />
                <Bar yAxisId="n" dataKey="count" fill="#1976d2" isAnimationActive={false} />
                <Bar yAxisId="n" dataKey="errors" fill="#d32f2f" isAnimationActive={false} />
                <Bar yAxisId="n" dataKey="rejected" name="rejected (4xx)" fill="#ed6c02" isAnimationActive={false} />
                <Line yAxisId="c" dataKey="cost" stroke="#2e7d32" isAnimationActive={false} />
              </ComposedChart>
            </ResponsiveContainer>
          </Box>
        </Grid>
        <Grid size={{ xs: 12, md: 6 }}>
          <Typography variant="overline">Per stage in the window (ms)</Typography>
          <Box sx={{ height: 220 }}>
            <ResponsiveContainer>
              <BarChart data={stages}>
                <CartesianGrid strokeDasharray="3 3" />
                <XAxis dataKey="stage" interval={0} tick={{ fontSize: 11 }} angle={-30} textAnchor="end" height={48} /><YAxis /><Tooltip /><Legend />
                <Bar dataKey="p50" fill="#1976d2" isAnimationActive={false} />
                <Bar dataKey="p95" fill="#ed6c02" isAnimationActive={false} />
                <Bar dataKey="p99" fill="#d32f2f" isAnimationActive={false} />
              </BarChart>
            </ResponsiveContainer>
          </Box>
        </Grid>
        <Grid size={{ xs: 12, md: 6 }}>
          <Typography variant="overline">Health</Typography>
          {health && (
            <Table size="small" data-testid="health">
              <TableBody>
                {Object.entries(health.parts).map(([k, v]) => (
                  <TableRow key={k}>
                    <TableCell>{k}</TableCell>
                    <TableCell><Chip size="small" label={v.status} color={v.status === "up" ? "success" : "error"} /></TableCell>
                    <TableCell sx={{ whiteSpace: "nowrap" }}>{ms(v.latency_ms)}</TableCell>
                    <TableCell sx={{ fontSize: 11 }}>{Object.entries(v).filter(([x]) => !["status", "latency_ms"].includes(x)).map(([x, y]) => `${x}: ${typeof y === "object" ? JSON.stringify(y) : y}`).join(" · ")}</TableCell>
                  </TableRow>
                ))}
              </TableBody>
            </Table>
          )}
        </Grid>
      </Grid>
      <Typography variant="overline" display="block" sx={{ mt: 2 }}>By {groupBy}</Typography>
      <Table size="small" data-testid="groups">
        <TableHead>
          <TableRow>
            <TableCell>{groupBy}</TableCell><TableCell>queries</TableCell><TableCell>error rate</TableCell>
            <TableCell>cache hits</TableCell><TableCell>P50</TableCell><TableCell>P95</TableCell><TableCell>P99</TableCell><TableCell>cost</TableCell>
          </TableRow>
        </TableHead>
        <TableBody>
          {m?.groups.map((g) => (
            <TableRow key={String(g.key)} data-testid="group-row" data-key={String(g.key)} data-count={g.count}>
              <TableCell>{g.key ?? <i title={NO_KEY[groupBy]}>(none)</i>}</TableCell><TableCell>{g.count}</TableCell><TableCell>{pct(g.error_rate)}</TableCell>
              <TableCell>{pct(g.cache_hit_rate)}</TableCell><TableCell>{ms(g.latency_ms.total?.p50)}</TableCell>
              <TableCell>{ms(g.latency_ms.total?.p95)}</TableCell><TableCell>{ms(g.latency_ms.total?.p99)}</TableCell>
              <TableCell>${g.cost_usd.total.toFixed(5)}</TableCell>
            </TableRow>
          ))}
        </TableBody>
      </Table>
    </Box>
  );
}
