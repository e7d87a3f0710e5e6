/** Types of lint/rooms.js (read by eslint.config.js as plain JavaScript, and by the tests). */
export declare const LAYERS: string[][];
export declare const ASSEMBLY: string[];
export declare const STARTED_ONLY: string[];
export declare const PURE: Record<string, { rooms: string[]; packages: string[] }>;
export declare const ROOMS: string[];
export declare function layerOf(room: string): number;
export declare function forbiddenFor(room: string): string[];
