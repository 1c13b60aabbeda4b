/**
 * Where the protocol files are (packages/server/proto). This module sits one level below the
 * package in the sources (src/) and in the build (dist/), so the same relative path works in both.
 */
import { fileURLToPath } from "node:url";

/** The directory of the `.proto` files. */
export const PROTO_DIR = fileURLToPath(new URL("../proto/", import.meta.url));
