import { Bar, BarChart, Legend, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import { Box, Chip, Link, Stack, Table, TableBody, TableCell, TableHead, TableRow, Tooltip as MuiTooltip, Typography } from "@mui/material";
import type { Answer } from "../api";

export const STAGES = ["embed", "vector", "bm25", "document", "fusion", "rerank", "neighbors", "gate", "generation"] as const;
const COLORS = ["#1976d2", "#9c27b0", "#2e7d32", "#00897b", "#ed6c02", "#d32f2f", "#0288d1", "#f9a825", "#6d4c41"];

/** A chunk's opening words: what tells chunks of one page apart ("p.3" three times). */
function snippet(r: Answer["retrieved"][number]): string {
  const text = r.text.replace(/\s+/g, " ").trim();
  return `“${text.slice(0, 70)}${text.length > 70 ? "…" : ""}”`;
}

const fmt = (v: number | null | undefined, d = 3) => (v === null || v === undefined ? "–" : Number(v).toFixed(d));

/** One run's X-ray: stage timings as a stacked bar, cost/tokens, cache, and the retrieved chunks
 * with their rank in the vector list, the BM25 list, fused (and reranked) with scores.
 * ``previous``: another run of the same question; then each chunk shows how its rank moved. */
export function XRay({ run, previous, title }: { run: Answer; previous?: Answer; title?: string }) {
  const t = run.timings_ms ?? {};
  const row: Record<string, number | string> = { name: "ms" };
  // only the stages this run timed: the legend then names what ran (no rerank without a reranker)
  const ran = STAGES.filter((s) => t[s] !== undefined && t[s] !== null);
  for (const s of ran) row[s] = Number(t[s]);
  const prevRank = new Map(previous?.retrieved.map((r) => [r.chunk_id, r.rank]) ?? []);
  const cited = new Set(run.citations.map((c) => c.chunk_id));
  const prevCited = new Set(previous?.citations.map((c) => c.chunk_id) ?? []);
  // "1 added (dmca.pdf p.3)": the cited chunks of one run the other does not cite, by document and page
  const changed = (cs: { chunk_id: string; doc_name: string; page: number }[], other: Set<string>, what: string) => {
    const only = [...new Map(cs.filter((c) => !other.has(c.chunk_id)).map((c) => [c.chunk_id, c])).values()];
    return `${only.length} ${what}${only.length ? ` (${only.map((c) => `${c.doc_name} p.${c.page}`).join(", ")})` : ""}`;
  };
  return (
    <Box data-testid="xray" data-mode={run.mode} sx={{ minWidth: 0 }}>
      <Stack direction="row" spacing={1} alignItems="center" flexWrap="wrap" sx={{ mb: 1 }}>
        {title && <Typography variant="subtitle2">{title}</Typography>}
        <Chip size="small" label={`mode ${run.mode}`} />
        {run.top_k ? <Chip size="small" label={`top_k ${run.top_k}`} /> : null}
        {run.strategy && <Chip size="small" label={`strategy ${run.strategy}`} />}
        <Chip size="small" label={`total ${fmt(t.total, 0)} ms`} />
        {t.ttft !== undefined && <Chip size="small" label={`TTFT ${fmt(t.ttft, 0)} ms`} />}
        <Chip size="small" label={`${run.usage?.model ?? "?"}: ${run.usage?.prompt_tokens ?? 0}+${run.usage?.completion_tokens ?? 0} tokens, $${fmt(run.usage?.cost_usd, 5)}`} />
        <Chip size="small" data-testid="cache" color={run.cache?.hit ? "success" : "default"}
          label={run.cache ? (run.cache.hit ? `cache hit (orig. $${fmt(run.cache.original_cost_usd, 5)})` : "cache miss") : "cache: not used when streaming"} />
      </Stack>
      {run.trace_id && (
        <Typography variant="caption" display="block" data-testid="trace-id" sx={{ mb: 0.5, fontFamily: "monospace" }}>
          trace {run.trace_url ? <Link href={run.trace_url} target="_blank" rel="noreferrer">{run.trace_id}</Link> : run.trace_id}
        </Typography>
      )}
      <Box sx={{ height: 70 }} data-testid="timings-bar">
        <ResponsiveContainer width="100%" height="100%">
          <BarChart data={[row]} layout="vertical" margin={{ left: 0, right: 10 }}>
            <XAxis type="number" unit=" ms" />
            <YAxis type="category" dataKey="name" hide />
            <Tooltip formatter={(v) => `${Number(v).toFixed(1)} ms`} />
            <Legend wrapperStyle={{ fontSize: 11 }} />
            {ran.map((s) => <Bar key={s} dataKey={s} stackId="t" fill={COLORS[STAGES.indexOf(s)]} isAnimationActive={false} />)}
          </BarChart>
        </ResponsiveContainer>
      </Box>
      <Table size="small" data-testid="xray-table">
        <TableHead>
          <TableRow>
            <TableCell>#</TableCell>
            <TableCell>chunk</TableCell>
            <TableCell>vector</TableCell>
            <TableCell>bm25</TableCell>
            <TableCell>fused</TableCell>
            <TableCell>rerank</TableCell>
            {previous && <TableCell>moved</TableCell>}
          </TableRow>
        </TableHead>
        <TableBody>
          {run.retrieved.map((r) => {
            const before = prevRank.get(r.chunk_id);
            const moved = previous ? (before === undefined ? "new" : before === r.rank ? "=" : before > r.rank ? `↑${before - r.rank}` : `↓${r.rank - before}`) : null;
            return (
              <TableRow key={r.chunk_id + r.rank} data-testid="xray-row" data-chunk={r.chunk_id}
                sx={{ bgcolor: cited.has(r.chunk_id) ? "rgba(46,125,50,0.08)" : undefined }}>
                <TableCell>{r.rank}</TableCell>
                <TableCell sx={{ maxWidth: 260 }}>
                  <MuiTooltip title={r.text.slice(0, 600)}>
                    <span>
                      {r.doc_name} p.{r.page_start}{r.page_end !== r.page_start ? `–${r.page_end}` : ""}
                      {cited.has(r.chunk_id) ? " (cited)" : ""}
                      {previous && cited.has(r.chunk_id) !== prevCited.has(r.chunk_id) ? (cited.has(r.chunk_id) ? " +cite" : " −cite") : ""}
                      {r.neighbor_of ? " (neighbour)" : ""}
                      {r.instruction_like ? " (holds text that reads as an instruction to an assistant: never quoted as evidence)" : ""}
                    </span>
                  </MuiTooltip>
                  <Typography variant="caption" color="text.secondary" display="block" noWrap data-testid="xray-snippet">
                    {snippet(r)}
                  </Typography>
                </TableCell>
                <TableCell data-testid="rank-vector">
                  {r.ranks.multilingual != null ? (
                    <MuiTooltip title="a chunk of a document not in English: ranked by the multilingual model, not the English one">
                      <span data-testid="rank-multilingual">{r.ranks.multilingual} (multilingual)<br /><small>{fmt(r.scores.multilingual)}</small></span>
                    </MuiTooltip>
                  ) : (
                    <>{r.ranks.vector ?? "–"}<br /><small>{fmt(r.scores.vector)}</small></>
                  )}
                </TableCell>
                <TableCell data-testid="rank-bm25">{r.ranks.bm25 ?? "–"}<br /><small>{fmt(r.scores.bm25, 2)}</small></TableCell>
                <TableCell data-testid="rank-fused">{r.ranks.fused ?? r.rank}<br /><small>{fmt(r.scores.rrf ?? r.score, 4)}</small></TableCell>
                <TableCell data-testid="rerank-score">
                  {r.scores.rerank != null ? fmt(r.scores.rerank) : r.scores.passage_rank != null ? (
                    <MuiTooltip title="passage rank: where the question's words sit in the passage, with its fused position">
                      <span>{fmt(r.scores.passage_rank, 2)}</span>
                    </MuiTooltip>
                  ) : "–"}
                </TableCell>
                {previous && <TableCell data-testid="moved">{moved}</TableCell>}
              </TableRow>
            );
          })}
        </TableBody>
      </Table>
      {run.label && <Box data-testid="xray-rules" sx={{ mt: 1 }}>
        <Typography variant="caption" component="div">
          concise answer:{" "}
          {run.concise ? (
            <span data-testid="xray-concise">
              “{run.concise.text}” ({run.concise.type}, {run.concise.rule}, confidence {fmt(run.concise.confidence, 2)})
            </span>
          ) : (
            <span data-testid="xray-concise">none shown</span>
          )}
        </Typography>
        <Typography variant="caption" component="div">rules that fired:</Typography>
        {(run.rules ?? []).length === 0 && <Typography variant="caption" component="div">none</Typography>}
        {(run.rules ?? []).map((f, i) => (
          <Typography key={i} variant="caption" component="div" data-testid="xray-rule" data-rule={f.rule}>
            <b>{f.rule}</b> ({f.effect}): {f.reason}
          </Typography>
        ))}
      </Box>}
      {previous && (
        <Typography variant="caption" data-testid="citations-diff">
          citations: {changed(run.citations, prevCited, "added")}, {changed(previous.citations, cited, "removed")}
        </Typography>
      )}
    </Box>
  );
}
