// Browser test of an admin list opened without the API key the server requires, driven by
// tests/browser/test_ui.py.
//
// usage: node no_key.mjs CONFIG.json   (base, api_key, chromium, playwright_core, screenshots)
// Prints one JSON object {ok, steps: {...}} on stdout; exits 1 with {ok: false, step, error} on failure.
import { finish, launch } from "./harness.mjs";

const h = await launch({ width: 1300, height: 800 });
const { cfg, base, shots, page } = h;
const out = { ok: false, steps: {} };
let step = "launch";

try {
  // 0. no key: a question asked in the chat is refused, and the error links to the key page
  step = "chat";
  await page.goto(`${base}/#/`);
  await page.getByTestId("question").fill("What is the accident number?");
  await page.getByTestId("ask").click();
  await page.getByTestId("turn-error").waitFor();
  out.steps.chat_error = await page.getByTestId("turn-error").innerText();
  await page.getByTestId("key-link").click();
  await page.getByTestId("key-input").waitFor();
  out.steps.chat_key_url = page.url();

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
  await page.locator(".MuiTableBody-root tr").first().waitFor();
  out.steps.rows_with_key = await page.locator(".MuiTableBody-root tr").count();
  out.steps.url_with_key = page.url();
  await finish(h, out);
} catch (error) {
  await finish(h, out, { step, error });
}
