/**
 * Express 4, installed under the alias `express4` (`npm:express@^4`) so that the adapter's
 * scenario table runs on Express 4 and 5 alike. Express 4 ships no types: the calls the tests
 * make are typed as Express 5's, which are the same for them.
 */
declare module "express4" {
  import express from "express";
  export default express;
}
