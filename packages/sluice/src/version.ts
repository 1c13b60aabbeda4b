/** This package's version (checked against package.json by a test); policy clients report it. */
export const VERSION = "0.1.0";
