// Browser test of the web UI, driven by tests/browser/test_ui.py (which starts the API and checks
// the JSON this prints). Headless Debian Chromium through playwright-core; no browser download.
//
// usage: node ui_flow.mjs CONFIG.json   (base, good_pdf, bad_pdf, sibling_pdf, question, expect_answer, expect_page,
//                                        dataset_jsonl, screenshots, chromium)
// Prints one JSON object {ok, steps: {...}} on stdout; exits 1 with {ok: false, step, error} on failure.
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import { finish, launch } from "./harness.mjs";

const h = await launch();
const { cfg, base, shots, page } = h;
const out = { ok: false, steps: {} };
let step = "launch";
const shot = async (name) => shots && page.screenshot({ path: `${shots}/${name}.png`, fullPage: false });
// the UI reads the API key from localStorage (as its key page stores it) and sends it itself; the
// script's own API calls send it too
const keyHeaders = cfg.api_key ? { "X-API-Key": cfg.api_key } : {};
if (cfg.api_key) await page.addInitScript((k) => localStorage.setItem("ragaudit.apiKey", k), cfg.api_key);
const api = async (path) => {
  const r = await page.request.get(base + path, { headers: keyHeaders });
  return { status: r.status(), headers: r.headers(), json: r.headers()["content-type"]?.includes("json") ? await r.json() : null };
};
// click a button that opens a stored PDF in a new tab: the tab's title, the URL of the frame showing
// the PDF, and what that URL serves (status, content type, the first bytes) read back in the page
const openPdf = async (button) => {
  const [tab] = await Promise.all([page.waitForEvent("popup"), button.click()]);
  const frame = tab.locator("[data-testid=pdf-frame]");
  await frame.waitFor({ state: "attached", timeout: 30_000 });
  const url = await frame.getAttribute("src");
  const title = await tab.title();
  const blob = url.startsWith("blob:") ? await page.evaluate(async (u) => {
    const r = await fetch(u.split("#")[0]);
    const b = new Uint8Array(await r.arrayBuffer());
    return { status: r.status, type: r.headers.get("content-type"), magic: String.fromCharCode(...b.slice(0, 5)) };
  }, url) : null;
  await tab.close();
  return { url, title, ...blob };
};
const check = (cond, msg) => { if (!cond) throw new Error(msg); };
// drop files on the upload zone (a real drop event); each keeps its base name, as a browser sends it
const drop = async (paths) => {
  const files = paths.map((p) => ({ name: basename(p), b64: readFileSync(p).toString("base64") }));
  const dt = await page.evaluateHandle((fs) => {
    const d = new DataTransfer();
    for (const f of fs) {
      const bytes = Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0));
      d.items.add(new File([bytes], f.name, { type: "application/pdf" }));
    }
    return d;
  }, files);
  await page.getByTestId("dropzone").dispatchEvent("drop", { dataTransfer: dt });
};

try {
  // 1. chat: drop a real PDF and a bad file together on the drop zone (a real drop event)
  step = "upload";
  await page.goto(`${base}/#/`);
  await page.getByTestId("dropzone").waitFor();
  // every ingestion caption the upload row shows while it runs ("ingestion: embedding · 4 of 4 pages ...")
  await page.evaluate(() => {
    window.__ingest = [];
    new MutationObserver(() => {
      for (const el of document.querySelectorAll("[data-testid=ingest-status]")) {
        if (!window.__ingest.includes(el.textContent)) window.__ingest.push(el.textContent);
      }
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
  await drop([cfg.good_pdf, cfg.bad_pdf]);
  const good = page.locator(`[data-testid=upload-item][data-name="${basename(cfg.good_pdf)}"]`);
  const bad = page.locator(`[data-testid=upload-item][data-name="${basename(cfg.bad_pdf)}"]`);
  await bad.locator("[data-testid=refusal]").waitFor();
  out.steps.refusal = await bad.locator("[data-testid=refusal]").innerText();
  await page.locator(`[data-testid=upload-item][data-name="${basename(cfg.good_pdf)}"][data-state=ready]`).waitFor({ timeout: 180_000 });
  out.steps.upload = await good.innerText();
  out.steps.ingest_captions = await page.evaluate(() => window.__ingest);
  await page.locator(`[data-testid=doc][data-name="${basename(cfg.good_pdf)}"][data-status=ready]`).waitFor();

  // 2. ask: the answer streams in; citations name document and page
  step = "ask";
  await page.getByTestId("question").fill(cfg.question);
  await page.getByTestId("ask").click();
  const turn = page.locator("[data-testid=turn]").first();
  await page.locator("[data-testid=turn][data-status=done]").first().waitFor();
  out.steps.answer = await turn.getByTestId("answer").innerText();
  out.steps.label = await turn.getByTestId("label").innerText();
  out.steps.concise = (await turn.getByTestId("concise").count()) ? await turn.getByTestId("concise").innerText() : null;
  const cite = turn.getByTestId("cite").first();
  out.steps.cite_title = await cite.getAttribute("title");
  check(out.steps.cite_title?.includes(`page ${cfg.expect_page}`), `first citation is ${out.steps.cite_title}`);
  await shot("chat");

  // 3. open the citation: chunk with the quote highlighted, link to the PDF at that page
  step = "citation";
  await cite.click();
  const dlg = page.getByTestId("citation-dialog");
  await dlg.waitFor();
  out.steps.citation_title = await dlg.locator("h2").innerText();
  out.steps.quote = await dlg.getByTestId("quote").innerText();
  out.steps.support = await dlg.getByTestId("support").innerText();
  check(out.steps.support.startsWith("Supports the claim"), `citation support shown as ${out.steps.support}`);
  const dialogText = await dlg.innerText();
  check(!/pages (\d+)–\1\b/.test(dialogText), `a one-page chunk shown as a page range: ${dialogText.slice(0, 200)}`);
  // the stored PDF needs the key (a plain link gets 401, step 5b): the button fetches it with the
  // key and opens it in a new tab from a blob: URL at the cited page
  out.steps.pdf = await openPdf(dlg.getByTestId("open-pdf"));
  await shot("citation");
  await dlg.getByRole("button", { name: "Close" }).click();

  // 4. X-ray: re-run in another mode and compare the ranks side by side
  step = "xray";
  const before = await turn.locator("[data-testid=xray] [data-testid=xray-row]").evaluateAll((rows) =>
    rows.map((r) => ({ chunk: r.dataset.chunk, vector: r.querySelector("[data-testid=rank-vector]").innerText.split("\n")[0],
      bm25: r.querySelector("[data-testid=rank-bm25]").innerText.split("\n")[0],
      fused: r.querySelector("[data-testid=rank-fused]").innerText.split("\n")[0],
      passage_rank: r.querySelector("[data-testid=rerank-score]").innerText,
      label: r.querySelector("td:nth-child(2) span").innerText, snippet: r.querySelector("[data-testid=xray-snippet]").innerText })));
  out.steps.legend = await turn.locator("[data-testid=timings-bar] .recharts-legend-item-text").allInnerTexts();
  await turn.getByTestId("xray-mode").click();
  await page.getByRole("option", { name: "vector", exact: true }).click();
  await turn.getByTestId("rerun").click();
  await turn.getByTestId("compare").waitFor();
  const after = await turn.locator("[data-testid=compare] [data-testid=xray][data-mode=vector] [data-testid=xray-row]").evaluateAll((rows) =>
    rows.map((r) => ({ chunk: r.dataset.chunk, vector: r.querySelector("[data-testid=rank-vector]").innerText.split("\n")[0],
      bm25: r.querySelector("[data-testid=rank-bm25]").innerText.split("\n")[0],
      passage_rank: r.querySelector("[data-testid=rerank-score]").innerText,
      moved: r.querySelector("[data-testid=moved]").innerText })));
  const citationsDiff = await turn.locator("[data-testid=compare] [data-testid=citations-diff]").innerText();
  out.steps.xray = { before, after, citations_diff: citationsDiff };
  await turn.getByTestId("compare").scrollIntoViewIfNeeded();
  await shot("xray");

  // 4b. scope: pick the document and a page range without the answer's page in the side panel and
  // ask again; the request carries the scope and every retrieved chunk lies inside it
  step = "scope";
  const other = cfg.expect_page === 1 ? 2 : 1;
  let scopedBody = null;
  const onRequest = (r) => { if (r.url().endsWith("/query/stream")) scopedBody = r.postData(); };
  page.on("request", onRequest);
  await page.getByLabel("from page").fill(String(other));
  await page.getByLabel("to page").fill(String(other));
  await page.getByLabel("documents", { exact: true }).click();
  await page.getByRole("option", { name: new RegExp(basename(cfg.good_pdf).replace(".", "\\.")) }).click();
  await page.keyboard.press("Escape");
  out.steps.scope_chips = await page.getByTestId("doc-picker").locator(".MuiChip-root").evaluateAll((cs) =>
    cs.map((c) => ({ text: c.innerText, title: c.getAttribute("title") })));
  await page.getByTestId("question").fill(cfg.question);
  await page.getByTestId("ask").click();
  // asking empties the question field; on a loaded CI machine a click was seen to reach no handler
  // (no second turn within 60 s): ask once more then, and record it; the turn must still appear
  const asked = await page.waitForFunction(() => document.querySelector("[data-testid=question]").value === "",
    null, { timeout: 15000 }).then(() => true, () => false);
  if (!asked) {
    out.steps.scope_ask_again = true;
    await page.getByTestId("ask").click();
  }
  await page.locator("[data-testid=turn]").nth(1).waitFor();
  const scoped = page.locator("[data-testid=turn]").first();
  await page.locator("[data-testid=turn]").first().and(page.locator("[data-status=done]")).waitFor();
  page.off("request", onRequest);
  out.steps.scope = {
    page: other,
    body: scopedBody ? JSON.parse(scopedBody) : null,
    label: await scoped.getByTestId("label").innerText(),
    rows: await scoped.locator("[data-testid=xray] [data-testid=xray-row] td:nth-child(2)").allInnerTexts(),
    cite_list: await scoped.locator("[data-testid=citation-list] li").evaluateAll((lis) =>
      lis.map((li) => ({ n: li.value, text: li.innerText, quotes: li.querySelectorAll("[data-testid=cite-source]").length }))),
    citations: (await scoped.getByTestId("cite").count()),
  };
  // every inline [n] opens its own quote: the k-th [n] is the k-th citation of source n
  out.steps.scope.opened = [];
  for (let i = 0; i < out.steps.scope.citations; i++) {
    await scoped.getByTestId("cite").nth(i).click();
    const d = page.getByTestId("citation-dialog");
    await d.waitFor();
    out.steps.scope.opened.push(await d.getByTestId("quote").innerText());
    await d.getByRole("button", { name: "Close" }).click();
    await d.waitFor({ state: "hidden" });
  }
  await shot("scope");
  // a page range that ends before it starts: the API's 422 is shown as its message, not as JSON
  await page.getByLabel("from page").fill("5");
  await page.getByLabel("to page").fill("2");
  await page.getByTestId("question").fill(cfg.question);
  await page.getByTestId("ask").click();
  await page.locator("[data-testid=turn]").first().getByTestId("turn-error").waitFor({ timeout: 60_000 });
  out.steps.range_error = await page.locator("[data-testid=turn]").first().getByTestId("turn-error").innerText();
  await page.getByLabel("from page").fill("");
  await page.getByLabel("to page").fill("");

  // 5. admin: chunks of that document (react-admin list filtered through the URL)
  step = "admin-chunks";
  const docs = (await api("/documents")).json;
  const doc = docs.find((d) => d.doc_name === basename(cfg.good_pdf));
  out.steps.doc = { id: doc.id, chunk_count: doc.chunk_count };
  await page.goto(`${base}/#/chunks?filter=${encodeURIComponent(JSON.stringify({ document_id: doc.id }))}&perPage=25`);
  await page.locator(".RaDatagrid-tbody tr").first().waitFor();
  out.steps.admin_rows = await page.locator(".RaDatagrid-tbody tr").count();
  out.steps.admin_doc_cells = await page.locator(".RaDatagrid-tbody tr td.column-document_id").allInnerTexts();
  out.steps.admin_pagination = await page.locator(".MuiTablePagination-displayedRows").innerText();
  await shot("admin");

  // 5b. the stored PDF: a plain request without the key is refused; the document page's "open"
  // fetches it with the key and opens it from a blob: URL
  step = "admin-pdf";
  out.steps.pdf_plain_status = (await page.request.get(`${base}/documents/${doc.id}/file`)).status();
  await page.goto(`${base}/#/documents/${doc.id}/show`);
  out.steps.admin_pdf = await openPdf(page.getByTestId("admin-open-pdf"));
  // the document's gold report: counts per rejection reason, each with its first rejected pair
  await page.getByTestId("gold-report").waitFor();
  out.steps.gold = {
    report: (await api(`/admin/api/documents/${doc.id}`)).json.gold_report,
    text: await page.getByTestId("gold-report").innerText(),
    examples: await page.locator("[data-testid=gold-rejected-examples] li").allInnerTexts(),
  };

  // 6. admin: edit a gold pair with evidence that is not in its chunk -> refused with the reason
  step = "admin-pair";
  const pairs = (await api(`/admin/api/qa_pairs?filter=${encodeURIComponent(JSON.stringify({ document_id: doc.id }))}`)).json;
  check(pairs.length > 0, "no gold pairs for the document");
  out.steps.pair = pairs[0].id;
  await page.goto(`${base}/#/qa_pairs/${pairs[0].id}`);
  const ev = page.getByLabel("Evidence");
  await ev.waitFor();
  await ev.fill("a sentence that is nowhere in this chunk");
  await page.getByRole("button", { name: "Save" }).click();
  const note = page.locator(".MuiSnackbarContent-message, .MuiAlert-message").filter({ hasText: "verbatim" });
  await note.first().waitFor();
  out.steps.pair_refusal = await note.first().innerText();
  const still = (await api(`/admin/api/qa_pairs/${pairs[0].id}`)).json;
  out.steps.pair_evidence_kept = still.evidence === pairs[0].evidence;
  await shot("admin-pair-refused");

  // 7. evaluation: upload a JSONL gold set, start a run, see metrics with intervals
  step = "evaluation";
  await page.goto(`${base}/#/evaluation`);
  await page.getByTestId("dataset-file").setInputFiles(cfg.dataset_jsonl);
  await page.waitForFunction(() => document.querySelector("[data-testid=dataset] input")?.value?.length > 0);
  // the modes offered: those the server can run (GET /modes); hybrid_rerank without a reranker is disabled
  await page.locator("[data-testid=mode-hybrid] input:checked").waitFor();
  out.steps.eval_modes = await page.locator("[data-testid^=mode-]").evaluateAll((ls) => ls.map((l) => ({
    mode: l.dataset.testid.slice(5), checked: l.querySelector("input").checked, disabled: l.querySelector("input").disabled })));
  await page.getByTestId("start-eval").click();
  await page.getByTestId("run-results").waitFor({ timeout: 180_000 });
  await page.locator("[data-testid=ci-row]").first().waitFor();
  out.steps.ci_rows = await page.locator("[data-testid=ci-row]").allInnerTexts();
  out.steps.question_rows = await page.locator("[data-testid=question-row]").count();
  // each question's cells (id, then one per mode: its rank · its answer label)
  out.steps.question_cells = await page.locator("[data-testid=question-row]").evaluateAll((rs) =>
    rs.map((r) => [...r.querySelectorAll("td")].map((td) => td.innerText)));
  await page.getByTestId("only-failures").click();
  out.steps.failure_rows = await page.locator("[data-testid=question-row]").count();
  out.steps.failure_flags = await page.locator("[data-testid=question-row]").evaluateAll((rs) => rs.map((r) => r.dataset.failed));
  await page.getByTestId("only-failures").click();
  // a question's cell opens its X-ray, asked again with the run's top_k (neighbours not counted)
  await page.locator("[data-testid=question-row] button").first().click();
  await page.getByTestId("eval-xray-live").waitFor({ timeout: 60_000 });
  out.steps.eval_xray = {
    note: await page.getByTestId("eval-xray-live").innerText(),
    chips: await page.locator(".MuiDialog-root .MuiChip-label").allInnerTexts(),
  };
  await page.keyboard.press("Escape");
  await page.locator(".MuiDialog-root").waitFor({ state: "detached" });
  await page.evaluate(() => window.scrollTo(0, 0));
  await shot("evaluation");

  // 7b. compare two runs: add a sibling report to the knowledge base (through the API), run the
  // same gold set again from the page, pick both runs and read the comparison as shown
  step = "evaluation-compare";
  const t7b = Date.now();
  const runA = (await api("/evaluate")).json[0].id;
  const sib = await page.request.post(`${base}/documents?wait=true`, { timeout: 180_000, headers: keyHeaders, multipart: {
    file: { name: basename(cfg.sibling_pdf), mimeType: "application/pdf", buffer: readFileSync(cfg.sibling_pdf) } } });
  check(sib.status() === 201, `sibling upload answered ${sib.status()}: ${await sib.text()}`);
  await page.getByTestId("start-eval").click();
  await page.locator(`[data-testid=run-row]:not([data-run-id="${runA}"])`).first().waitFor();
  await page.locator(`[data-testid=run-row][data-run-id="${runA}"]`).click();
  const cmp = page.getByTestId("run-compare");
  const readRows = () => cmp.locator("[data-testid=compare-row]").evaluateAll((rs) => rs.map((r) => ({
    mode: r.dataset.mode, ...Object.fromEntries(["a-mean", "a-ci", "b-mean", "b-ci", "diff"].map((k) => [k, r.querySelector(`[data-testid=${k}]`).textContent])) })));
  const loaded = () => page.waitForFunction(() => {
    const cells = [...document.querySelectorAll("[data-testid=run-compare] [data-testid=compare-row] [data-testid=b-mean]")];
    return cells.length > 0 && cells.every((c) => c.textContent !== "–");
  }, null, { timeout: 180_000 });
  await loaded();
  const compare = {
    run_a: await cmp.getAttribute("data-run-a"), run_b: await cmp.getAttribute("data-run-b"),
    run_views: await page.locator("[data-testid=run-results]").evaluateAll((rs) => rs.map((r) => r.dataset.runId)),
    metrics: { mrr: await readRows() },
    changed_count: await cmp.getByTestId("compare-changed-count").textContent(),
    run_index: await page.locator("[data-testid=run-index]").allTextContents(),
    index_note: (await cmp.getByTestId("compare-index-changed").count())
      ? await cmp.getByTestId("compare-index-changed").textContent() : null,
    questions: await cmp.locator("[data-testid=compare-question]").evaluateAll((rs) => rs.map((r) => ({
      id: r.dataset.id, changed: r.dataset.changed,
      cells: Object.fromEntries([...r.querySelectorAll("[data-testid=compare-cell]")].map((c) => [c.dataset.mode, c.textContent])) }))),
  };
  await cmp.getByTestId("compare-metric").click();
  await page.getByRole("option", { name: "hit@1", exact: true }).click();
  await cmp.locator("thead").getByText("A hit@1").waitFor();
  compare.metrics["hit@1"] = await readRows();
  await cmp.getByTestId("only-changed").click();
  compare.only_changed = await cmp.locator("[data-testid=compare-question]").evaluateAll((rs) => rs.map((r) => r.dataset.id));
  compare.seconds = (Date.now() - t7b) / 1000;
  out.steps.compare = compare;
  await cmp.scrollIntoViewIfNeeded();
  await shot("evaluation-compare");

  // 8. observability: counts equal /metrics for the same window
  step = "observability";
  await page.goto(`${base}/#/observability`);
  let shown = null, metrics = null;
  for (let i = 0; i < 20; i++) {
    await page.getByTestId("refresh").click();
    await page.waitForTimeout(700);
    shown = Number(await page.getByTestId("obs-count").innerText());
    metrics = (await api("/metrics?group_by=mode")).json;
    if (shown === metrics.overall.count) break;
  }
  out.steps.obs = {
    shown, metrics_count: metrics.overall.count,
    groups_shown: await page.locator("[data-testid=group-row]").evaluateAll((rs) => rs.map((r) => [r.dataset.key, Number(r.dataset.count)])),
    groups_metrics: metrics.groups.map((g) => [String(g.key), g.count]),
    health_rows: await page.locator("[data-testid=health] tr").count(),
  };
  await shot("observability");

  // 9. two different files both named report.pdf (two folders' files, as a browser sends them): the
  //    second is a new version of the first, and its upload row says which version it replaces
  step = "same-name";
  await page.goto(`${base}/#/`);
  await page.getByTestId("dropzone").waitFor();
  await drop([cfg.same_name_a]);
  await page.locator("[data-testid=upload-item][data-name='report.pdf'][data-state=ready]").first().waitFor({ timeout: 120_000 });
  await drop([cfg.same_name_b]);
  const second = page.locator("[data-testid=upload-item][data-name='report.pdf']").first();
  await second.locator("[data-testid=replaces]").waitFor();
  out.steps.same_name = {
    first_replaces: await page.locator("[data-testid=upload-item][data-name='report.pdf']").nth(1).locator("[data-testid=replaces]").count(),
    second_replaces: await second.locator("[data-testid=replaces]").innerText(),
  };
  await page.locator("[data-testid=upload-item][data-name='report.pdf']").first().and(page.locator("[data-state=ready]")).waitFor({ timeout: 120_000 });
  await finish(h, out);
} catch (error) {
  await finish(h, out, { step, error });
}
