import { StrictMode, useState } from "react";
import { createRoot } from "react-dom/client";
import { Admin, AppBar, CustomRoutes, fetchUtils, Layout, Menu, Resource, Title } from "react-admin";
import type { AuthProvider } from "react-admin";
import simpleRestProvider from "ra-data-simple-rest";
import { Route, useLocation } from "react-router-dom";
import { Alert, Box, Button, TextField, Typography } from "@mui/material";
import ChatIcon from "@mui/icons-material/Chat";
import InsightsIcon from "@mui/icons-material/Insights";
import MonitorHeartIcon from "@mui/icons-material/MonitorHeart";
import KeyIcon from "@mui/icons-material/Key";
import { KEY_STORAGE, authHeaders } from "./api";
import { ChatPage } from "./chat/ChatPage";
import { EvaluationPage } from "./pages/Evaluation";
import { ObservabilityPage } from "./pages/Observability";
import * as R from "./admin/resources";

// ra-data-simple-rest over the API's /admin/api bridge, with the API key (if any) on every request
const httpClient = (url: string, options: fetchUtils.Options = {}) => {
  const headers = new Headers(options.headers ?? { Accept: "application/json" });
  for (const [k, v] of Object.entries(authHeaders())) headers.set(k, v);
  return fetchUtils.fetchJson(url, { ...options, headers });
};
const dataProvider = simpleRestProvider("/admin/api", httpClient);

// no login: the key page keeps the API key. A list or record the server refuses for a missing or
// wrong key (401, RAGAUDIT_API_KEYS set) opens that page with the reason, instead of an empty list
const authProvider: AuthProvider = {
  login: async () => undefined,
  logout: async () => undefined,
  checkAuth: async () => undefined,
  checkError: async (error) => {
    if (error?.status === 401) {
      throw { logoutUser: false, redirectTo: "/key?refused=1", message: `${error.message} — this page needs the API key` };
    }
  },
  getPermissions: async () => undefined,
};

function KeyPage() {
  const [key, setKey] = useState(localStorage.getItem(KEY_STORAGE) ?? "");
  const [saved, setSaved] = useState(false);
  const refused = new URLSearchParams(useLocation().search).has("refused");
  return (
    <Box sx={{ p: 2, maxWidth: 480 }}>
      <Title title="API key" />
      {refused && !saved && (
        <Alert severity="warning" sx={{ mb: 2 }} data-testid="key-refused">
          The server refused a page without a valid API key: enter one of its RAGAUDIT_API_KEYS, then go back.
        </Alert>
      )}
      <Typography variant="body2" gutterBottom>
        Only needed when the server sets RAGAUDIT_API_KEYS. Kept in this browser's localStorage and sent as X-API-Key.
      </Typography>
      <TextField type="password" inputProps={{ "data-testid": "key-input" }} fullWidth size="small" label="API key" value={key} onChange={(e) => setKey(e.target.value)} />
      <Button sx={{ mt: 1 }} variant="contained" data-testid="save-key"
        onClick={() => { if (key) localStorage.setItem(KEY_STORAGE, key); else localStorage.removeItem(KEY_STORAGE); setSaved(true); }}>Save</Button>
      {saved && <Typography variant="body2" sx={{ mt: 1 }} data-testid="key-saved">{key ? "Saved: every page now sends it." : "Removed."}</Typography>}
    </Box>
  );
}

const AppMenu = () => (
  <Menu>
    <Menu.Item to="/" primaryText="Chat & X-ray" leftIcon={<ChatIcon />} />
    <Menu.Item to="/evaluation" primaryText="Evaluation" leftIcon={<InsightsIcon />} />
    <Menu.Item to="/observability" primaryText="Observability" leftIcon={<MonitorHeartIcon />} />
    <Menu.ResourceItems />
    <Menu.Item to="/key" primaryText="API key" leftIcon={<KeyIcon />} />
  </Menu>
);
// no user menu: there is no user to log out, only the key page
const AppLayout = ({ children }: { children: React.ReactNode }) => (
  <Layout menu={AppMenu} appBar={() => <AppBar userMenu={false} />}>{children}</Layout>
);

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <Admin dataProvider={dataProvider} authProvider={authProvider} layout={AppLayout} dashboard={ChatPage} title="ragaudit" disableTelemetry>
      <Resource name="documents" list={R.DocumentList} show={R.DocumentShow} edit={R.DocumentEdit} recordRepresentation="doc_name" />
      <Resource name="chunks" list={R.ChunkList} show={R.ChunkShow} />
      <Resource name="qa_pairs" options={{ label: "Gold Q&A pairs" }} list={R.PairList} edit={R.PairEdit} create={R.PairCreate} recordRepresentation="question" />
      <Resource name="datasets" list={R.DatasetList} />
      <Resource name="query_logs" options={{ label: "Query logs" }} list={R.QueryLogList} show={R.QueryLogShow} />
      <Resource name="eval_runs" options={{ label: "Evaluation runs" }} list={R.EvalRunList} show={R.EvalRunShow} />
      <CustomRoutes>
        <Route path="/evaluation" element={<EvaluationPage />} />
        <Route path="/observability" element={<ObservabilityPage />} />
        <Route path="/key" element={<KeyPage />} />
      </CustomRoutes>
    </Admin>
  </StrictMode>,
);
