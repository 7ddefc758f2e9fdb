// check.mjs FILE...: reads WARC files with Webrecorder's warcio (resolved
// from NODE_PATH), recomputes every record's WARC-Block-Digest and, for
// response and request records, its WARC-Payload-Digest (sha1, base32: the
// bytes after the HTTP headers, with a chunked body's framing taken off by
// warcio's own reader, any Content-Encoding kept), and prints one JSON
// object: the number of records by WARC-Type and the digests that did not
// match.
import { createReadStream } from "node:fs";
import { createHash } from "node:crypto";
import { createRequire } from "node:module";

const require = createRequire(process.env.NODE_PATH.split(":")[0] + "/");
const { WARCParser, AsyncIterReader } = require("warcio");

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
function base32(buf) {
  let bits = 0, value = 0, out = "";
  for (const b of buf) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += alphabet[(value << (5 - bits)) & 31];
  while (out.length % 8) out += "=";
  return out;
}
const sha1 = (b) => "sha1:" + base32(createHash("sha1").update(b).digest());

function indexOfHeadEnd(b) {
  for (let i = 0; i + 3 < b.length; i++) {
    if (b[i] === 13 && b[i + 1] === 10 && b[i + 2] === 13 && b[i + 3] === 10) return i + 4;
  }
  return -1;
}

const counts = {};
const bad = [];
for (const file of process.argv.slice(2)) {
  const parser = new WARCParser(createReadStream(file), { parseHttp: false });
  for await (const record of parser) {
    const type = record.warcType;
    counts[type] = (counts[type] || 0) + 1;
    const block = await record.readFully(false);
    const uri = record.warcTargetURI || "";
    const bd = record.warcBlockDigest;
    if (bd !== sha1(block)) bad.push(`${file}: ${type} ${uri}: block digest ${bd}, computed ${sha1(block)}`);
    const pd = record.warcPayloadDigest;
    if ((type === "response" || type === "request") && pd) {
      const end = indexOfHeadEnd(block);
      let payload = end < 0 ? new Uint8Array() : block.subarray(end);
      const head = end < 0 ? "" : new TextDecoder().decode(block.subarray(0, end));
      if (/^transfer-encoding:[^\r\n]*chunked/im.test(head)) {
        payload = await new AsyncIterReader([payload], null, true).readFully();
      }
      const got = sha1(payload);
      if (pd !== got) bad.push(`${file}: ${type} ${uri}: payload digest ${pd}, computed ${got}`);
    }
  }
}
console.log(JSON.stringify({ counts, bad }));
