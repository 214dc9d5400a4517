/**
 * A throwaway certificate authority for the TLS tests, made with the openssl
 * command line: a CA, a server certificate for 127.0.0.1 and localhost, and
 * a client certificate for mTLS, as PEM files in a temporary directory.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface Certificates {
  directory: string;
  caFile: string;
  serverCertFile: string;
  serverKeyFile: string;
  ca: Buffer;
  clientCert: Buffer;
  clientKey: Buffer;
  remove(): void;
}

function openssl(cwd: string, ...args: string[]): void {
  execFileSync("openssl", args, { cwd, stdio: ["ignore", "ignore", "pipe"] });
}

function issue(directory: string, name: string, extensions: string): void {
  writeFileSync(join(directory, `${name}.ext`), extensions);
  openssl(directory, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
    "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=memsvc ${name}`);
  openssl(directory, "x509", "-req", "-in", `${name}.csr`, "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
    "-days", "1", "-extfile", `${name}.ext`, "-out", `${name}.crt`);
}

export function makeCertificates(): Certificates {
  const directory = mkdtempSync(join(tmpdir(), "memsvc-node-tls-"));
  openssl(directory, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
    "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=memsvc test CA", "-days", "1");
  issue(directory, "server", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n");
  issue(directory, "client", "extendedKeyUsage=clientAuth\n");
  const read = (name: string): Buffer => readFileSync(join(directory, name));
  return {
    directory,
    caFile: join(directory, "ca.crt"),
    serverCertFile: join(directory, "server.crt"),
    serverKeyFile: join(directory, "server.key"),
    ca: read("ca.crt"),
    clientCert: read("client.crt"),
    clientKey: read("client.key"),
    remove: () => rmSync(directory, { recursive: true, force: true }),
  };
}
