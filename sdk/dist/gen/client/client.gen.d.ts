import type { Client, Config } from './types.gen.js';
export declare const createClient: (config?: Config) => Client;
