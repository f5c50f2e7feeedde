// Browser test of an admin list opened without the API key the server requires, driven by
// tests/browser/test_ui.py. Headless Debian Chromium through playwright-core; no browser download.
//
// usage: node no_key.mjs CONFIG.json   (base, api_key, chromium, playwright_core, screenshots)
// Prints one JSON object {ok, steps: {...}} on stdout; exits 1 with {ok: false, step, error} on failure.
import { readFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const cfg = JSON.parse(readFileSync(process.argv[2], "utf8"));
const { chromium } = require(cfg.playwright_core);
const base = cfg.base.replace(/\/$/, "");
const shots = cfg.screenshots;
if (shots) mkdirSync(shots, { recursive: true });
const out = { ok: false, steps: {} };
let step = "launch";

const browser = await chromium.launch({
  executablePath: cfg.chromium,
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
});
const page = await browser.newPage({ viewport: { width: 1300, height: 800 } });
page.setDefaultTimeout(60_000);
const consoleErrors = [];
page.on("pageerror", (e) => consoleErrors.push(String(e)));

try {
  // 1. no key in this browser: the query-log list is refused, and the key page opens with why
  step = "refused";
  await page.goto(`${base}/#/query_logs`);
  await page.getByTestId("key-refused").waitFor();
  out.steps.url = page.url();
  out.steps.notice = await page.getByTestId("key-refused").innerText();
  if (shots) await page.screenshot({ path: `${shots}/key-refused.png` });
  // 2. enter the key, go back: the list shows the logged requests
  step = "with-key";
  await page.getByTestId("key-input").fill(cfg.api_key);
  await page.getByTestId("save-key").click();
  await page.getByTestId("key-saved").waitFor();
  await page.goto(`${base}/#/query_logs`);
  await page.locator(".RaDatagrid-row, .MuiTableBody-root tr").first().waitFor();
  out.steps.rows_with_key = await page.locator(".MuiTableBody-root tr").count();
  out.steps.url_with_key = page.url();
  out.steps.page_errors = consoleErrors;
  out.ok = true;
} catch (e) {
  out.step = step;
  out.error = String(e?.stack ?? e);
  out.steps.page_errors = consoleErrors;
  if (shots) await page.screenshot({ path: `${shots}/failure-nokey-${step}.png` }).catch(() => {});
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
process.exit(out.ok ? 0 : 1);
