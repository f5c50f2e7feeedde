import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

// The API serves the built files (dist/) at "/"; in `npx vite` dev mode API calls are proxied.
const api = process.env.RAGAUDIT_API ?? "http://127.0.0.1:8000";
export default defineConfig({
  plugins: [react()],
  build: { outDir: "dist", chunkSizeWarningLimit: 4000 },
  server: {
    proxy: Object.fromEntries(
      ["/documents", "/query", "/search", "/health", "/metrics", "/datasets", "/evaluate", "/admin/api"].map((p) => [p, api]),
    ),
  },
});
