import {
  AutocompleteInput, BooleanField, BooleanInput, Create, Datagrid, DateField, DeleteButton, Edit, FunctionField,
  List, NumberField, NumberInput, ReferenceField, ReferenceInput, ReferenceManyField, SearchInput, SelectInput,
  Show, SimpleForm, SimpleShowLayout, TextField, TextInput, required, TopToolbar, EditButton, useNotify,
} from "react-admin";
import { Button } from "@mui/material";
import { openPdf, STRATEGIES } from "../api";

const strategyChoices = STRATEGIES.map((s) => ({ id: s, name: s }));
const clip = (n: number) => (r: any, key: string) => String(r?.[key] ?? "").slice(0, n);

/** Opens the stored PDF with the API key (a plain link cannot send it); errors go to the notification bar. */
function OpenPdf({ id, name }: { id: string; name?: string }) {
  const notify = useNotify();
  return (
    <Button size="small" data-testid="admin-open-pdf"
      onClick={() => openPdf(id, undefined, name).catch((e) => notify(`PDF: ${(e as Error).message}`, { type: "error" }))}>
      open
    </Button>
  );
}

// ---- documents ----
const docFilters = [
  <SearchInput source="q" alwaysOn key="q" />,
  <SelectInput source="status" key="status" choices={["pending", "ready", "failed"].map((s) => ({ id: s, name: s }))} />,
  <TextInput source="knowledge_base" key="kb" />,
];
export const DocumentList = () => (
  <List filters={docFilters} sort={{ field: "created_at", order: "DESC" }}>
    <Datagrid rowClick="show">
      <TextField source="doc_name" />
      <TextField source="knowledge_base" />
      <TextField source="status" />
      <NumberField source="pages" />
      <NumberField source="chunk_count" label="chunks" />
      <TextField source="strategy" />
      <NumberField source="ingest_version" label="version" />
      <TextField source="error" />
      <DateField source="created_at" showTime />
      <DeleteButton mutationMode="pessimistic" />
    </Datagrid>
  </List>
);
export const DocumentShow = () => (
  <Show actions={<TopToolbar><EditButton label="Re-ingest" /><DeleteButton mutationMode="pessimistic" /></TopToolbar>}>
    <SimpleShowLayout>
      <TextField source="id" />
      <TextField source="doc_name" />
      <TextField source="title" />
      <TextField source="knowledge_base" />
      <TextField source="status" />
      <TextField source="error" />
      <NumberField source="pages" />
      <NumberField source="chunk_count" />
      <TextField source="strategy" />
      <TextField source="extractor" />
      <TextField source="sha256" />
      <NumberField source="ingest_version" />
      <DateField source="ingested_at" showTime />
      <FunctionField label="extraction report" render={(r: any) => <ExtractionReport report={r.extraction_report} />} />
      <FunctionField label="gold Q&A pairs" render={(r: any) => <GoldReport report={r.gold_report} />} />
      <FunctionField label="PDF" render={(r: any) => <OpenPdf id={r.id} name={r.doc_name} />} />
      <ReferenceManyField label="Chunks" reference="chunks" target="document_id" sort={{ field: "index", order: "ASC" }}>
        <Datagrid rowClick="show" bulkActionButtons={false}>
          <NumberField source="index" />
          <NumberField source="page_start" />
          <NumberField source="page_end" />
          <TextField source="section" />
          <FunctionField label="text" render={(r: any) => clip(120)(r, "text")} />
        </Datagrid>
      </ReferenceManyField>
    </SimpleShowLayout>
  </Show>
);
// a query's cost in USD is often a few millionths of a dollar: three significant digits, not three decimals
const COST_FORMAT = { style: "currency", currency: "USD", maximumSignificantDigits: 3 } as const;
// What extraction left out of the version's text (ragaudit.ingest.removal.extraction_report)
const ExtractionReport = ({ report }: { report: any }) => {
  if (!report) return <span>not recorded for this version (ingested before extraction reports)</span>;
  const rl = report.running_lines ?? {};
  const ht = report.hidden_text ?? {};
  const ug = report.unmapped_glyphs ?? {};
  const reasons = Object.entries(ht.by_reason ?? {}).map(([k, v]) => `${k} ${v}`).join(", ");
  return (
    <div>
      <div>
        running headers/footers removed: {rl.removed ?? 0} ({rl.headers ?? 0} headers, {rl.footers ?? 0} footers, on {rl.pages ?? 0} pages)
      </div>
      <ul>{(rl.examples ?? []).map((e: any, i: number) => <li key={i}>{e.where} ×{e.count} (pages {e.pages.join(", ")}): {e.text}</li>)}</ul>
      <div>hidden characters removed: {ht.chars ?? 0}{reasons ? ` (${reasons})` : ""}; OCR-layer characters kept: {ht.ocr_layer_chars ?? 0}</div>
      <ul>{(ht.examples ?? []).map((e: any, i: number) => <li key={i}>p.{e.page} {e.reason}: {e.text}</li>)}</ul>
      {(ht.unchecked_pages ?? []).length ? <div>pages not checked for hidden text: {ht.unchecked_pages.join(", ")}</div> : null}
      {ug.ligatures || ug.unknown ? (
        <div data-testid="unmapped-glyphs">
          glyphs without a Unicode value: {ug.ligatures ?? 0} read as ligatures, {ug.unknown ?? 0} shown as �
          {(ug.examples ?? []).length ? ` (${ug.examples.map((e: any) => `p.${e.page} ${e.text}`).join("; ")})` : ""}
        </div>
      ) : null}
    </div>
  );
};
// The last gold-pair generation (ragaudit.evaluate.goldgen): generated, stored, rejected per reason
const GoldReport = ({ report }: { report: any }) => {
  if (!report) return <span>not recorded for this version</span>;
  const rejected = Object.entries(report.rejected ?? {}).filter(([, n]) => Number(n) > 0);
  const kinds = Object.entries(report.by_kind ?? {}).map(([k, n]) => `${k} ${n}`).join(", ");
  return (
    <div data-testid="gold-report">
      <div>
        generator {report.generator}{report.model ? ` (${report.model})` : ""}: {report.generated ?? 0} generated, {report.stored ?? 0} stored
        {report.paraphrases ? `, ${report.paraphrases} paraphrased` : ""}{kinds ? ` (${kinds})` : ""}
      </div>
      <div>
        rejected: {rejected.length ? rejected.map(([k, n]) => `${k.replaceAll("_", " ")} ${n}`).join(", ") : "none"}
        {report.failed_chunks ? `; ${report.failed_chunks} chunks failed` : ""}
        {report.discarded_instruction ? `; ${report.discarded_instruction} with evidence that reads as an instruction` : ""}
      </div>
      {rejected.some(([k]) => report.rejected_examples?.[k]) ? (
        <ul data-testid="gold-rejected-examples">
          {rejected
            .filter(([k]) => report.rejected_examples?.[k])
            .map(([k]) => (
              <li key={k}>
                first rejected as {k.replaceAll("_", " ")}: {report.rejected_examples[k]}
              </li>
            ))}
        </ul>
      ) : null}
      {report.llm_calls ? (
        <div data-testid="gold-cost">
          cost: {report.llm_calls} LLM calls, {report.prompt_tokens ?? 0}+{report.completion_tokens ?? 0} tokens,{" "}
          {report.cost_usd == null ? "price unknown" : `$${Number(report.cost_usd).toPrecision(3)}`}
        </div>
      ) : null}
    </div>
  );
};
export const DocumentEdit = () => (
  <Edit mutationMode="pessimistic" title="Re-ingest with another chunking strategy">
    <SimpleForm>
      <TextField source="doc_name" />
      <SelectInput source="strategy" choices={strategyChoices} validate={required()} helperText="Saving re-ingests the stored PDF with this strategy" />
    </SimpleForm>
  </Edit>
);

// ---- chunks ----
const chunkFilters = [
  <SearchInput source="q" alwaysOn key="q" />,
  <ReferenceInput source="document_id" reference="documents" alwaysOn key="doc">
    <AutocompleteInput optionText="doc_name" label="document" />
  </ReferenceInput>,
  <NumberInput source="page_start_gte" label="from page" key="pmin" />,
  <NumberInput source="page_end_lte" label="to page" key="pmax" />,
  <SelectInput source="strategy" choices={strategyChoices} key="strategy" />,
];
export const ChunkList = () => (
  <List filters={chunkFilters} sort={{ field: "index", order: "ASC" }}>
    <Datagrid rowClick="show" bulkActionButtons={false}>
      <ReferenceField source="document_id" reference="documents"><TextField source="doc_name" /></ReferenceField>
      <NumberField source="index" />
      <NumberField source="page_start" />
      <NumberField source="page_end" />
      <TextField source="strategy" />
      <TextField source="section" label="heading path" />
      <NumberField source="token_count" label="tokens" />
      <FunctionField label="text" render={(r: any) => clip(140)(r, "text")} />
    </Datagrid>
  </List>
);
export const ChunkShow = () => (
  <Show>
    <SimpleShowLayout>
      <TextField source="id" />
      <ReferenceField source="document_id" reference="documents" link="show"><TextField source="doc_name" /></ReferenceField>
      <NumberField source="index" />
      <FunctionField label="page span" render={(r: any) => `${r.page_start}–${r.page_end}`} />
      <TextField source="section" label="heading path" />
      <TextField source="strategy" />
      <NumberField source="token_count" />
      <BooleanField source="instruction_like" label="reads as an instruction to an assistant" />
      <NumberField source="instruction_score" />
      <FunctionField label="characters" render={(r: any) => `${r.char_start}–${r.char_end}`} />
      <TextField source="text" sx={{ whiteSpace: "pre-wrap" }} />
    </SimpleShowLayout>
  </Show>
);

// ---- gold Q&A pairs ----
const pairFilters = [
  <SearchInput source="q" alwaysOn key="q" />,
  <ReferenceInput source="document_id" reference="documents" key="doc"><AutocompleteInput optionText="doc_name" label="document" /></ReferenceInput>,
  <TextInput source="generator" key="gen" />,
  <SelectInput source="kind" key="kind" choices={["labelled_value", "table_cell", "vote_table", "sentence", "llm", "manual"].map((s) => ({ id: s, name: s.replace("_", " ") }))} />,
  <SelectInput source="answer_type" key="type" label="answer type" choices={["date", "amount", "percent", "count", "person", "organisation", "identifier", "text"].map((s) => ({ id: s, name: s }))} />,
  <BooleanInput source="paraphrase" key="para" />,
];
export const PairList = () => (
  <List filters={pairFilters} sort={{ field: "created_at", order: "DESC" }}>
    <Datagrid rowClick="edit">
      <TextField source="question" />
      <TextField source="answer" />
      <ReferenceField source="document_id" reference="documents"><TextField source="doc_name" /></ReferenceField>
      <NumberField source="page" />
      <TextField source="generator" />
      <TextField source="kind" />
      <TextField source="answer_type" label="answer type" />
      <BooleanField source="paraphrase" />
      <DateField source="created_at" />
    </Datagrid>
  </List>
);
const PairForm = () => (
  <SimpleForm>
    <TextInput source="question" multiline fullWidth validate={required()} />
    <TextInput source="answer" fullWidth validate={required()} />
    <TextInput source="evidence" multiline fullWidth validate={required()} helperText="Must occur verbatim in the chunk's text (whitespace may differ)" />
    <TextInput source="chunk_id" fullWidth validate={required()} />
  </SimpleForm>
);
export const PairEdit = () => <Edit mutationMode="pessimistic"><PairForm /></Edit>;
export const PairCreate = () => <Create redirect="list"><PairForm /></Create>;

// ---- read-only ----
export const DatasetList = () => (
  <List sort={{ field: "created_at", order: "DESC" }}>
    <Datagrid bulkActionButtons={false} rowClick={false}>
      <TextField source="name" /><TextField source="source" /><NumberField source="n_questions" /><DateField source="created_at" showTime />
    </Datagrid>
  </List>
);
const logFilters = [
  <SearchInput source="q" alwaysOn key="q" />,
  <SelectInput source="endpoint" key="e" choices={["query", "stream", "search"].map((s) => ({ id: s, name: s }))} />,
  <SelectInput source="mode" key="m" choices={["vector", "bm25", "hybrid", "hybrid_rerank"].map((s) => ({ id: s, name: s }))} />,
  <TextInput source="label" key="l" />,
  <BooleanInput source="cache_hit" key="c" />,
];
export const QueryLogList = () => (
  <List filters={logFilters} sort={{ field: "created_at", order: "DESC" }}>
    <Datagrid rowClick="show" bulkActionButtons={false}>
      <DateField source="created_at" showTime />
      <TextField source="endpoint" />
      <TextField source="question" />
      <TextField source="mode" />
      <TextField source="label" />
      <BooleanField source="cache_hit" />
      <NumberField source="total_ms" />
      <NumberField source="cost_usd" options={COST_FORMAT} />
      <TextField source="error_kind" />
    </Datagrid>
  </List>
);
export const QueryLogShow = () => (
  <Show>
    <SimpleShowLayout>
      {["id", "created_at", "endpoint", "question", "mode", "top_k", "strategy", "model", "label", "error_kind", "cache_source_id"].map((f) => <TextField key={f} source={f} />)}
      <BooleanField source="cache_hit" />
      {["embed_ms", "vector_ms", "bm25_ms", "fusion_ms", "rerank_ms", "document_ms", "multilingual_ms", "neighbors_ms", "gate_ms", "generation_ms", "ttft_ms", "total_ms", "prompt_tokens", "completion_tokens"].map((f) => <NumberField key={f} source={f} />)}
      <NumberField source="cost_usd" options={COST_FORMAT} />
      <FunctionField label="scope" render={(r: any) => JSON.stringify(r.scope)} />
      <FunctionField label="retrieved" render={(r: any) => (r.retrieved_ids ?? []).join(", ")} />
      <FunctionField label="cited" render={(r: any) => (r.cited_ids ?? []).join(", ")} />
    </SimpleShowLayout>
  </Show>
);
export const EvalRunList = () => (
  <List sort={{ field: "created_at", order: "DESC" }}>
    <Datagrid rowClick="show" bulkActionButtons={false}>
      <DateField source="created_at" showTime />
      <TextField source="dataset" />
      <TextField source="status" />
      <FunctionField label="progress" render={(r: any) => `${r.progress?.done}/${r.progress?.total}`} />
      <FunctionField label="hit@5" render={(r: any) => Object.entries(r.modes ?? {}).map(([m, v]: [string, any]) => `${m} ${Number(v["hit@5"]).toFixed(2)}`).join(" · ")} />
      <TextField source="error" />
    </Datagrid>
  </List>
);
export const EvalRunShow = () => (
  <Show>
    <SimpleShowLayout>
      <TextField source="id" /><TextField source="dataset" /><TextField source="status" /><TextField source="error" />
      <DateField source="created_at" showTime /><DateField source="finished_at" showTime />
      <FunctionField label="params" render={(r: any) => JSON.stringify(r.params)} />
      <TextField source="question_split" label="questions" />
      <FunctionField label="retrieval" render={(r: any) => <pre>{JSON.stringify(r.modes, null, 1)}</pre>} />
      <FunctionField label="answers" render={(r: any) => <pre>{JSON.stringify(r.answers_summary, null, 1)}</pre>} />
    </SimpleShowLayout>
  </Show>
);
