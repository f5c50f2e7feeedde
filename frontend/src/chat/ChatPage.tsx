import { useCallback, useEffect, useMemo, useState } from "react";
import { fetchEventSource } from "@microsoft/fetch-event-source";
import Markdown from "react-markdown";
import {
  Alert, Autocomplete, Box, Button, Card, CardContent, Chip, Dialog, DialogActions, DialogContent, DialogTitle,
  Grid, Link, MenuItem, Stack, TextField, Typography,
} from "@mui/material";
import { Title } from "react-admin";
import { Answer, authHeaders, Citation, detailText, Doc, getJSON, MODES, Modes, openPdf, postJSON, QUESTION_MAX_CHARS, Retrieved, ScopeIn, STRATEGIES, useModes } from "../api";
import { Upload } from "./Upload";
import { XRay } from "./XRay";

interface Turn {
  id: string;
  question: string;
  scope: ScopeIn;
  status: "streaming" | "done" | "error";
  error?: string;
  runs: Answer[]; // runs[0]: the streamed answer; then re-runs from the X-ray controls
}

const HISTORY = "ragaudit.chat";
const loadHistory = (): Turn[] => {
  try {
    return JSON.parse(sessionStorage.getItem(HISTORY) ?? "[]");
  } catch {
    return [];
  }
};

/** "[1]" / "[1, 2]" in the answer become markdown links #cite-n (opened in a dialog); a document's
 * own bracketed number, quoted as "\[34]", stays text (Markdown shows it as "[34]"). */
export function linkCitations(text: string): string {
  // the k-th "[n]" links to the k-th citation of source n: an answer can quote two sentences of one source
  const seen = new Map<string, number>();
  return text.replace(/(?<!\\)\[(\d+(?:\s*,\s*\d+)*)\]/g, (_m, nums: string) =>
    nums.split(",").map((raw) => {
      const n = raw.trim();
      const k = seen.get(n) ?? 0;
      seen.set(n, k + 1);
      return `[[${n}]](#cite-${n}-${k})`;
    }).join(""));
}

/** Excerpt of a quote for the citation list (the list tells two quotes of one source apart). */
function excerpt(quote: string, max = 70): string {
  const q = quote.trim();
  return q.length <= max ? q : `${q.slice(0, max).replace(/\s+\S*$/, "")}…`;
}

/** The chunk text with the quoted sentence highlighted (whitespace-insensitive match). */
function Highlighted({ text, quote }: { text: string; quote: string }) {
  const words = quote.trim().split(/\s+/).filter(Boolean).map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const m = words.length ? new RegExp(words.join("\\s+")).exec(text) : null;
  if (!m) return <span style={{ whiteSpace: "pre-wrap" }}>{text}</span>;
  return (
    <span style={{ whiteSpace: "pre-wrap" }}>
      {text.slice(0, m.index)}
      <mark data-testid="quote">{m[0]}</mark>
      {text.slice(m.index + m[0].length)}
    </span>
  );
}

function CitationDialog({ cite, source, onClose }: { cite: Citation | null; source?: Retrieved; onClose: () => void }) {
  const [pdfError, setPdfError] = useState<string | null>(null);
  if (!cite) return null;
  const documentId = source?.document_id;
  return (
    <Dialog open onClose={onClose} maxWidth="md" fullWidth data-testid="citation-dialog">
      <DialogTitle>[{cite.n}] {cite.doc_name}, {pagesLabel(cite)}</DialogTitle>
      <DialogContent dividers>
        <Typography variant="caption" display="block" gutterBottom>
          chunk {cite.chunk_id}{source ? ` · ${source.page_start === source.page_end ? `page ${source.page_start}` : `pages ${source.page_start}–${source.page_end}`}` : ""}
          {source?.section ? ` · ${source.section}` : ""} · quote {cite.verified ? "verified in the chunk" : "NOT verified"}
        </Typography>
        {cite.supports !== undefined && (
          <Typography variant="body2" gutterBottom data-testid="support" color={cite.supports ? "success.main" : "error.main"}>
            {cite.supports ? "Supports the claim" : "Does NOT support the claim"}{cite.reason ? `: ${cite.reason}` : ""}
          </Typography>
        )}
        {source ? <Highlighted text={source.text} quote={cite.quote} /> : <blockquote>{cite.quote}</blockquote>}
        {pdfError && <Alert severity="error" sx={{ mt: 1 }} data-testid="pdf-error">{pdfError}</Alert>}
      </DialogContent>
      <DialogActions>
        {documentId && (
          <Button data-testid="open-pdf" data-page={cite.page}
            onClick={() => { setPdfError(null); openPdf(documentId, cite.page, cite.doc_name).catch((e) => setPdfError(`PDF: ${(e as Error).message}`)); }}>
            Open the PDF at page {cite.page}
          </Button>
        )}
        <Button onClick={onClose}>Close</Button>
      </DialogActions>
    </Dialog>
  );
}

const LABEL_COLOR: Record<string, "success" | "warning" | "error" | "info"> = {
  answered: "success", refused: "warning", clarifying: "info", uncited: "error", unsupported: "error",
};

/** "page 3", or "pages 9–10" for a quote that runs across a page break. */
function pagesLabel(c: Citation): string {
  const ps = c.pages && c.pages.length ? c.pages : [c.page];
  return ps.length > 1 ? `pages ${ps[0]}–${ps[ps.length - 1]}` : `page ${ps[0]}`;
}

/** The mode menu's items: every mode, those the server cannot run disabled with the reason. */
function modeItems(modes: Modes | null) {
  return MODES.map((m) => {
    const why = modes?.unavailable[m];
    return <MenuItem key={m} value={m} disabled={!!why} title={why}>{why ? `${m} (unavailable)` : m}</MenuItem>;
  });
}

function TurnView({ turn, onRerun, modes }: { turn: Turn; onRerun: (t: Turn, mode: string, topK: number, strategy: string) => void; modes: Modes | null }) {
  const [open, setOpen] = useState<Citation | null>(null);
  const run = turn.runs[turn.runs.length - 1];
  const first = turn.runs[0];
  const [mode, setMode] = useState(run?.mode ?? "hybrid");
  const [topK, setTopK] = useState(run?.top_k ?? 5);
  const [strategy, setStrategy] = useState(run?.strategy ?? "");
  const byChunk = new Map(first?.retrieved.map((r) => [r.chunk_id, r]) ?? []);
  const cites = new Map<number, Citation[]>();  // source n -> its citations, in answer order
  for (const c of first?.citations ?? []) cites.set(c.n, [...(cites.get(c.n) ?? []), c]);
  const [a, b] = turn.runs.length >= 2 ? [turn.runs[turn.runs.length - 2], turn.runs[turn.runs.length - 1]] : [first, undefined];
  return (
    <Card variant="outlined" sx={{ mb: 2 }} data-testid="turn" data-status={turn.status}>
      <CardContent>
        <Typography variant="subtitle1" fontWeight="bold">Q: {turn.question}</Typography>
        <Grid container spacing={2}>
          <Grid size={{ xs: 12, xl: 5 }}>
            {first && (
              <>
                <Stack direction="row" spacing={1} sx={{ my: 1 }}>
                  {turn.status === "done" && <Chip data-testid="label" label={first.label} color={LABEL_COLOR[first.label] ?? "default"} size="small" />}
                  {turn.status === "streaming" && <Chip label="streaming…" size="small" />}
                </Stack>
                {turn.status === "done" && first.concise && (
                  <Box data-testid="concise" sx={{ mb: 1 }}>
                    <Typography variant="h6" component="div">{first.concise.text}</Typography>
                    <Typography variant="caption" color="text.secondary">
                      concise answer ({first.concise.type}, confidence {first.concise.confidence.toFixed(2)}), read from the quote below
                    </Typography>
                  </Box>
                )}
                <Box data-testid="answer">
                  <Markdown
                    components={{
                      a: ({ href, children }) => {
                        const m = /^#cite-(\d+)-(\d+)$/.exec(href ?? "");
                        if (!m) return <a href={href}>{children}</a>;
                        const group = cites.get(Number(m[1])) ?? [];
                        const c = group[Math.min(Number(m[2]), group.length - 1)];
                        return (
                          <Link component="button" data-testid="cite" data-n={m[1]}
                            title={c ? `${c.doc_name}, page ${c.page}` : undefined}
                            onClick={() => c && setOpen(c)} sx={{ verticalAlign: "baseline" }}>
                            {children}
                          </Link>
                        );
                      },
                    }}
                  >
                    {linkCitations(first.answer)}
                  </Markdown>
                </Box>
                {first.citations.length > 0 && (
                  <Box component="ol" sx={{ pl: 3, my: 0 }} data-testid="citation-list">
                    {/* one item per source [n]; a source quoted more than once lists each quote, by its page */}
                    {[...cites.entries()].map(([n, cs]) => (
                      <li key={n} value={n} data-testid="cite-item">
                        {cs.length > 1 && `${cs[0].doc_name}: `}
                        {cs.map((c, i) => (
                          <span key={i}>
                            {i > 0 && " · "}
                            <Link component="button" onClick={() => setOpen(c)} data-testid="cite-source">
                              {cs.length > 1 ? pagesLabel(c) : `${c.doc_name}, ${pagesLabel(c)}`}
                            </Link>
                            {cs.length > 1 && <small data-testid="cite-excerpt">{` “${excerpt(c.quote)}”`}</small>}
                            {!c.verified && " (quote not verified)"}
                            {c.verified && c.supports === false && ` (does not support the claim: ${c.reason ?? "unsupported"})`}
                          </span>
                        ))}
                      </li>
                    ))}
                  </Box>
                )}
                {first.notes.length > 0 && (
                  <Alert severity="info" sx={{ mt: 1 }} data-testid="notes">
                    {first.notes.map((n, i) => <div key={i}>{n}</div>)}
                  </Alert>
                )}
              </>
            )}
            {turn.error && <Alert severity="error" data-testid="turn-error">{turn.error}<KeyHint message={turn.error} /></Alert>}
          </Grid>
          <Grid size={{ xs: 12, xl: 7 }}>
            {(turn.status === "done" || (turn.status === "error" && !!first?.query_id)) && (
              <>
                <Box sx={{ display: "flex", flexWrap: "wrap", gap: 1, alignItems: "center", mb: 1 }}>
                  <Typography variant="overline">X-ray</Typography>
                  {turn.status === "error" && <Chip size="small" color="error" data-testid="xray-failed" label="generation failed: retrieval below" />}
                  <TextField select size="small" label="mode" value={mode} sx={{ width: 150 }} onChange={(e) => setMode(e.target.value)} data-testid="xray-mode">
                    {modeItems(modes)}
                  </TextField>
                  <TextField size="small" type="number" label="top_k" value={topK} sx={{ width: 90 }}
                    onChange={(e) => setTopK(Math.max(1, Math.min(100, Number(e.target.value) || 5)))} />
                  <TextField select size="small" label="strategy" value={strategy} sx={{ width: 150 }} onChange={(e) => setStrategy(e.target.value)}
                    SelectProps={{ displayEmpty: true }} InputLabelProps={{ shrink: true }}>
                    <MenuItem value="">(document's)</MenuItem>
                    {STRATEGIES.map((m) => <MenuItem key={m} value={m}>{m}</MenuItem>)}
                  </TextField>
                  <Button variant="outlined" size="small" onClick={() => onRerun(turn, mode, topK, strategy)} data-testid="rerun">Re-run &amp; compare</Button>
                </Box>
                {b ? (
                  <Grid container spacing={1} data-testid="compare">
                    <Grid size={{ xs: 12, xl: 6 }}><XRay run={a} title="before" /></Grid>
                    <Grid size={{ xs: 12, xl: 6 }}><XRay run={b} previous={a} title="after" /></Grid>
                  </Grid>
                ) : (
                  <XRay run={a} />
                )}
              </>
            )}
          </Grid>
        </Grid>
      </CardContent>
      <CitationDialog cite={open} source={open ? byChunk.get(open.chunk_id) : undefined} onClose={() => setOpen(null)} />
    </Card>
  );
}

/** A refusal for want of the API key links to the page that sets it (as the admin views open it). */
function KeyHint({ message }: { message: string }) {
  if (!/API key/i.test(message)) return null;
  return <> — <a href="#/key?refused=1" data-testid="key-link">set the API key</a></>;
}

export function ChatPage() {
  const [docs, setDocs] = useState<Doc[]>([]);
  const [kb, setKb] = useState("default");
  const [picked, setPicked] = useState<Doc[]>([]);
  const [pageMin, setPageMin] = useState("");
  const [pageMax, setPageMax] = useState("");
  const [mode, setMode] = useState("hybrid");
  const modes = useModes();
  const [topK, setTopK] = useState(5);
  const [strategy, setStrategy] = useState("sentence");
  const [question, setQuestion] = useState("");
  const [turns, setTurns] = useState<Turn[]>(loadHistory);
  const [error, setError] = useState<string | null>(null);

  const refresh = useCallback(() => {
    getJSON<Doc[]>("/documents").then(setDocs).catch((e) => setError(e.message));
  }, []);
  useEffect(refresh, [refresh]);
  useEffect(() => sessionStorage.setItem(HISTORY, JSON.stringify(turns)), [turns]);
  const kbs = useMemo(() => Array.from(new Set(["default", ...docs.map((d) => d.knowledge_base)])), [docs]);

  const update = (id: string, f: (t: Turn) => Turn) => setTurns((ts) => ts.map((t) => (t.id === id ? f(t) : t)));

  const ask = async () => {
    const q = question.trim();
    if (!q) return;
    const scope: ScopeIn = { knowledge_base: kb || undefined };
    if (picked.length) scope.document_ids = picked.map((d) => d.id);
    if (pageMin) scope.page_min = Number(pageMin);
    if (pageMax) scope.page_max = Number(pageMax);
    const id = `${Date.now()}`;
    const run: Answer = {
      query_id: "", question: q, answer: "", label: "", citations: [], retrieved: [], mode, notes: [],
      timings_ms: {}, usage: { model: "", prompt_tokens: 0, completion_tokens: 0, cost_usd: 0 }, cache: null, top_k: topK,
      strategy: null,
    };
    setTurns((ts) => [{ id, question: q, scope, status: "streaming", runs: [run] }, ...ts]);
    setQuestion("");
    const setRun = (f: (a: Answer) => Answer) => update(id, (t) => ({ ...t, runs: [f(t.runs[0])] }));
    class Fatal extends Error {}
    try {
      await fetchEventSource("/query/stream", {
        method: "POST",
        headers: { "content-type": "application/json", ...authHeaders() },
        body: JSON.stringify({ question: q, ...scope, mode, top_k: topK }),
        openWhenHidden: true,
        async onopen(r) {
          if (!r.ok) {
            let msg = r.status === 401 ? "missing or invalid API key" : `${r.status}`;
            try { const b = await r.json(); msg = detailText(b.detail) ?? msg; } catch { /* not JSON */ }
            throw new Fatal(typeof msg === "string" ? msg : JSON.stringify(msg));
          }
        },
        onmessage(ev) {
          const data = ev.data ? JSON.parse(ev.data) : {};
          if (ev.event === "sources") {
            setRun((a) => ({ ...a, query_id: data.query_id, retrieved: data.sources, notes: data.notes ?? [], trace_id: data.trace_id ?? null, trace_url: data.trace_url ?? null }));
          } else if (ev.event === "token") {
            setRun((a) => ({ ...a, answer: a.answer + data.text }));
          } else if (ev.event === "done") {
            setRun((a) => ({ ...a, ...data }));
            update(id, (t) => ({ ...t, status: "done" }));
          } else if (ev.event === "error") {
            // what retrieval found and how long each stage took stay in the X-ray of the failed answer
            setRun((a) => ({ ...a, timings_ms: data.timings_ms ?? a.timings_ms, usage: data.usage ?? a.usage }));
            // the detail already names the error's kind ("InternalServerError: the LLM provider failed ...")
            const detail = String(data.detail ?? "");
            throw new Fatal(detail.startsWith(`${data.error}`) ? detail : `${data.error}: ${detail}`);
          }
        },
        onerror(e) {
          throw e instanceof Fatal ? e : new Fatal(String(e));
        },
      });
    } catch (e) {
      update(id, (t) => ({ ...t, status: "error", error: (e as Error).message }));
    }
  };

  const rerun = async (t: Turn, m: string, k: number, s: string) => {
    try {
      const out = await postJSON<Answer>("/query", { question: t.question, ...t.scope, mode: m, top_k: k, strategy: s || undefined });
      update(t.id, (x) => ({ ...x, runs: [...x.runs, { ...out, top_k: k, strategy: s || null }] }));
    } catch (e) {
      update(t.id, (x) => ({ ...x, error: (e as Error).message }));
    }
  };

  return (
    <Box sx={{ p: 2 }}>
      <Title title="Chat" />
      {error && <Alert severity="error">{error}<KeyHint message={error} /></Alert>}
      <Grid container spacing={2}>
        <Grid size={{ xs: 12, md: 3 }}>
          <Typography variant="overline">Upload</Typography>
          <Upload knowledgeBase={kb} strategy={strategy} onChange={refresh} />
          <Typography variant="overline" display="block" sx={{ mt: 2 }}>Scope</Typography>
          <Stack spacing={1.5}>
            <Autocomplete freeSolo options={kbs} value={kb} onInputChange={(_e, v) => setKb(v)}
              renderInput={(p) => <TextField {...p} size="small" label="knowledge base" />} />
            <Autocomplete multiple options={docs.filter((d) => !kb || d.knowledge_base === kb)} value={picked}
              getOptionLabel={(d) => `${d.doc_name} (${d.pages} p., ${d.status})`} onChange={(_e, v) => setPicked(v)}
              isOptionEqualToValue={(a, b) => a.id === b.id}
              // a picked document's chip names it alone (its pages and status are in the list), the rest on hover
              renderValue={(value, getItemProps) => value.map((d, index) => {
                const { key, ...itemProps } = getItemProps({ index });
                return <Chip key={key} {...itemProps} size="small" label={d.doc_name} title={`${d.doc_name} (${d.pages} p., ${d.status})`} />;
              })}
              renderInput={(p) => <TextField {...p} size="small" label="documents" helperText={picked.length ? undefined : "none picked: all are searched"} />}
              data-testid="doc-picker" />
            <Stack direction="row" spacing={1}>
              <TextField size="small" type="number" label="from page" value={pageMin} onChange={(e) => setPageMin(e.target.value)} />
              <TextField size="small" type="number" label="to page" value={pageMax} onChange={(e) => setPageMax(e.target.value)} />
            </Stack>
            <Stack direction="row" spacing={1}>
              <TextField select size="small" label="mode" value={mode} onChange={(e) => setMode(e.target.value)} sx={{ flex: 1 }}>
                {modeItems(modes)}
              </TextField>
              <TextField size="small" type="number" label="top_k" value={topK} sx={{ width: 80 }}
                onChange={(e) => setTopK(Math.max(1, Math.min(100, Number(e.target.value) || 5)))} />
            </Stack>
            <TextField select size="small" label="chunking strategy (uploads)" value={strategy} onChange={(e) => setStrategy(e.target.value)}>
              {STRATEGIES.map((m) => <MenuItem key={m} value={m}>{m}</MenuItem>)}
            </TextField>
          </Stack>
          <Typography variant="overline" display="block" sx={{ mt: 2 }}>Documents</Typography>
          <Box data-testid="doc-list">
            {docs.map((d) => (
              <Typography key={d.id} variant="caption" display="block" data-testid="doc" data-status={d.status} data-name={d.doc_name}>
                {d.doc_name} · {d.knowledge_base} · {d.status}{d.error ? ` (${d.error})` : ""}
              </Typography>
            ))}
          </Box>
        </Grid>
        <Grid size={{ xs: 12, md: 9 }}>
          <Stack direction="row" spacing={1} sx={{ mb: 2 }}>
            <TextField fullWidth size="small" label="Ask a question about your documents" value={question}
              onChange={(e) => setQuestion(e.target.value)} onKeyDown={(e) => e.key === "Enter" && void ask()}
              inputProps={{ "data-testid": "question", maxLength: QUESTION_MAX_CHARS }}
              helperText={question.length > QUESTION_MAX_CHARS * 0.9 ? `${question.length} / ${QUESTION_MAX_CHARS} characters` : undefined} />
            <Button variant="contained" onClick={() => void ask()} disabled={!question.trim()} data-testid="ask">Ask</Button>
            <Button onClick={() => setTurns([])}>Clear</Button>
          </Stack>
          {turns.map((t) => <TurnView key={t.id} turn={t} onRerun={rerun} modes={modes} />)}
        </Grid>
      </Grid>
    </Box>
  );
}
