import { defineConfig } from '@hey-api/openapi-ts';

// The SDK of the browser view, generated from the repository's OpenAPI document into
// src/gen/ (src/*.ts beside it are written by hand: the configured client, errors, the
// polling helper). `npm run generate` rewrites src/gen/; `npm run check` fails when it
// differs from a fresh generation. The output directory can be overridden for that check.
export default defineConfig({
  input: '../openapi/openapi.yaml',
  output: {
    path: process.env.AGENTFY_SDK_OUT ?? 'src/gen',
    // Relative imports end in .js, so the compiled files load as browser ES modules.
    module: { extension: '.js' },
  },
  plugins: [
    // No default base URL: the document's development server is not the partner's API.
    // src/client.ts refuses a request without one.
    { name: '@hey-api/client-fetch', baseUrl: false },
    {
      name: '@hey-api/typescript',
      // The body schema is called WorkerView like the tag's class; the type gets a
      // suffix so the package exports the class under its own name.
      definitions: (name: string) => (name === 'WorkerView' ? 'WorkerViewBody' : name),
    },
    {
      name: '@hey-api/sdk',
      // One class per tag with static methods named by operationId:
      // Agents.listAgents, WorkerView.getAgentWorkerView, WorkerView.getPartnerWorkerView.
      operations: { strategy: 'byTags', container: 'class', methods: 'static' },
    },
  ],
});
