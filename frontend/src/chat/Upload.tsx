import { useCallback, useState } from "react";
import { useDropzone } from "react-dropzone";
import { Alert, Box, Chip, LinearProgress, Paper, Stack, Typography } from "@mui/material";
import { ApiError, Doc, getJSON, uploadWithProgress } from "../api";

/** One file being uploaded: upload progress, then what the API says about its ingestion. */
interface Item {
  key: string;
  name: string;
  progress: number; // 0..1 of the bytes sent
  state: "uploading" | "ingesting" | "ready" | "failed" | "refused";
  status?: string; // the API's document status or ingest status
  detail?: string; // the API's reason (4xx detail, document.error)
  doc?: Doc;
  ingest?: number; // ingestion progress 0..1 when the API reports one (asynchronous ingestion)
  counts?: string; // pages extracted and chunks embedded so far ("4 of 4 pages · 12 of 30 chunks")
  replaces?: string; // new content under a name already taken: the version it replaces (the API's message)
}

const TERMINAL = new Set(["ready", "failed"]);

interface Count { done: number; total: number }

/** What GET /documents/{id} says of an ingestion run (``progress``: pages extracted, chunks
 * embedded) as the share done (0..1; undefined before the first count) and a caption: pages
 * count for extraction (the first half of the bar), chunks for embedding (the second half). */
export function ingestProgress(status: string, p?: { pages?: Count; chunks?: Count }): { share?: number; counts: string } {
  const pages = p?.pages, chunks = p?.chunks;
  const counts = [
    // while queued, the server already reads the pages ahead of the run
    pages && pages.total ? `${pages.done} of ${pages.total} pages${status === "queued" ? " read ahead" : ""}` : "",
    chunks && chunks.total ? `${chunks.done} of ${chunks.total} chunks` : "",
  ].filter(Boolean).join(" · ");
  if (status === "indexing") return { share: 1, counts };
  if (chunks && chunks.total && status !== "extracting") return { share: 0.5 + (0.5 * chunks.done) / chunks.total, counts };
  if (pages && pages.total) return { share: (0.5 * pages.done) / pages.total, counts };
  return { counts };
}

/** Drag-and-drop PDF upload (several files at once) to POST /documents, with per-file progress.
 * Works with today's blocking upload (201 {status, document}) and with an asynchronous one
 * (202 + document.status queued/...: the document is polled until ready or failed). */
export function Upload({ knowledgeBase, strategy, onChange }: {
  knowledgeBase: string;
  strategy: string;
  onChange: () => void;
}) {
  const [items, setItems] = useState<Item[]>([]);
  const patch = (key: string, p: Partial<Item>) =>
    setItems((xs) => xs.map((x) => (x.key === key ? { ...x, ...p } : x)));

  const poll = useCallback(async (key: string, id: string) => {
    for (let i = 0; i < 600; i++) {
      const d = await getJSON<Doc & { progress?: { pages?: Count; chunks?: Count } }>(`/documents/${id}`);
      const { share, counts } = ingestProgress(d.status, d.progress);
      patch(key, { status: d.status, doc: d, detail: d.error ?? undefined, ingest: share, counts });
      if (TERMINAL.has(d.status)) {
        patch(key, { state: d.status === "ready" ? "ready" : "failed" });
        onChange();
        return;
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  }, [onChange]);

  const onDrop = useCallback((files: File[]) => {
    for (const f of files) {
      const key = `${f.name}-${Date.now()}-${Math.random()}`;
      setItems((xs) => [{ key, name: f.name, progress: 0, state: "uploading" }, ...xs]);
      const form = new FormData();
      form.append("file", f, f.name);
      form.append("knowledge_base", knowledgeBase || "default");
      form.append("strategy", strategy);
      uploadWithProgress<{ status: string; document: Doc; message?: string; replaces?: { ingest_version: number } | null }>(
        "/documents", form, (p) => {
          patch(key, { progress: p, ...(p >= 1 ? { state: "ingesting" } : {}) });
        })
        .then((out) => {
          const d = out.document;
          const replaces = out.replaces
            ? `${d.doc_name}: new content under a name already in this knowledge base; it replaces version ` +
              `${out.replaces.ingest_version} once indexed (upload it under another name to keep both)`
            : undefined;
          patch(key, { status: `${out.status} · ${d.status}`, doc: d, progress: 1, replaces });
          if (TERMINAL.has(d.status)) {
            patch(key, { state: d.status === "ready" ? "ready" : "failed", detail: d.error ?? out.message });
            onChange();
          } else {
            patch(key, { state: "ingesting" });
            void poll(key, d.id);
          }
        })
        .catch((e: ApiError) => patch(key, { state: "refused", progress: 1, detail: e.message, status: String(e.status) }));
    }
  }, [knowledgeBase, strategy, poll, onChange]);

  const { getRootProps, getInputProps, isDragActive } = useDropzone({ onDrop, multiple: true });
  return (
    <Box>
      <Paper
        variant="outlined"
        {...getRootProps()}
        data-testid="dropzone"
        sx={{ p: 2, textAlign: "center", cursor: "pointer", borderStyle: "dashed", bgcolor: isDragActive ? "action.hover" : undefined }}
      >
        <input {...getInputProps()} data-testid="file-input" />
        <Typography variant="body2">Drop PDFs here, or click to choose (several at once)</Typography>
      </Paper>
      <Stack spacing={1} sx={{ mt: 1 }}>
        {items.map((it) => (
          <Box key={it.key} data-testid="upload-item" data-state={it.state} data-name={it.name}>
            <Stack direction="row" spacing={1} alignItems="center">
              <Typography variant="body2" sx={{ flex: 1, overflow: "hidden", textOverflow: "ellipsis" }}>{it.name}</Typography>
              <Chip size="small" label={it.state}
                color={it.state === "ready" ? "success" : it.state === "refused" || it.state === "failed" ? "error" : "default"} />
            </Stack>
            <LinearProgress
              variant={it.state === "ingesting" && it.ingest === undefined ? "indeterminate" : "determinate"}
              value={(it.state === "ingesting" && it.ingest !== undefined ? it.ingest : it.progress) * 100} />
            {it.state === "ingesting" && it.status && (
              <Typography variant="caption" data-testid="ingest-status">
                ingestion: {it.status}{it.counts ? ` · ${it.counts}` : ""}
              </Typography>
            )}
            {it.doc && it.state === "ready" && (
              <Typography variant="caption">{it.doc.pages} pages · {it.doc.chunk_count} chunks · {it.status}</Typography>
            )}
            {it.replaces && <Alert severity="warning" sx={{ py: 0 }} data-testid="replaces">{it.replaces}</Alert>}
            {it.detail && (it.state === "refused" || it.state === "failed") && (
              <Alert severity="error" sx={{ py: 0 }} data-testid="refusal">{it.detail}</Alert>
            )}
          </Box>
        ))}
      </Stack>
    </Box>
  );
}
