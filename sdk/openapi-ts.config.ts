import { defineConfig } from '@hey-api/openapi-ts';

// The SDK of the browser view, generated from the repository's OpenAPI document.
// `npm run generate` rewrites src/; `npm run check` fails when src/ differs from a fresh
// generation. The output directory can be overridden for that check.
export default defineConfig({
  input: '../openapi/openapi.yaml',
  output: {
    path: process.env.AGENTFY_SDK_OUT ?? 'src',
    // Relative imports end in .js, so the compiled files load as browser ES modules.
    module: { extension: '.js' },
  },
  plugins: [
    '@hey-api/client-fetch',
    {
      name: '@hey-api/typescript',
      // The body schema is called WorkerView like the tag's class; the type gets a
      // suffix so the package exports the class under its own name.
      definitions: (name: string) => (name === 'WorkerView' ? 'WorkerViewBody' : name),
    },
    {
      name: '@hey-api/sdk',
      // One class per tag with static methods named by operationId:
      // WorkerView.getAgentWorkerView, WorkerView.getPartnerWorkerView.
      operations: { strategy: 'byTags', container: 'class', methods: 'static' },
    },
  ],
});
