// A real OAuth 2.1 authorization server for the access-control tests: oidc-provider on loopback.
//
// node server.mjs CONFIG.json
//
// CONFIG: { "keys_file": path of a JWKS with private keys (the signing keys, first one signs),
//           "clients": [{ "client_id", "client_secret", "scope" }],
//           "resources": { "<resource URI>": { "scope": "a b", "ttl": seconds } },
//           "default_resource": a URI or null }
//
// It listens on 127.0.0.1 on a port the OS picks and prints one JSON line per event on stdout:
// {"event": "ready", "issuer": ...} once it accepts connections, {"event": "token", ...} for
// every token request (its grant type, resource and scope parameters, to see what a client
// sent), {"event": "reloaded", "kids": [...]} after a "reload" line on stdin re-read the keys
// file (key rotation: a new provider with the same issuer takes over). Issued access tokens are
// RFC 9068 JWTs (typ at+jwt) whose aud is the RFC 8707 resource.

import fs from 'node:fs';
import http from 'node:http';
import readline from 'node:readline';

import Provider, { errors } from 'oidc-provider';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));

function emit(event) {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

function keys() {
  return JSON.parse(fs.readFileSync(config.keys_file, 'utf8'));
}

function build(issuer) {
  const jwks = keys();
  const provider = new Provider(issuer, {
    clients: config.clients.map((client) => ({
      client_id: client.client_id,
      client_secret: client.client_secret,
      scope: client.scope,
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: client.token_endpoint_auth_method ?? 'client_secret_basic',
    })),
    jwks,
    cookies: { keys: ['test-only-cookie-key'] },
    scopes: ['booking:read', 'booking:write'],
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      introspection: { enabled: false },
      revocation: { enabled: false },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => config.default_resource ?? undefined,
        getResourceServerInfo: (ctx, resourceIndicator) => {
          const server = config.resources[resourceIndicator];
          if (!server) {
            throw new errors.InvalidTarget();
          }
          return {
            scope: server.scope,
            audience: resourceIndicator,
            accessTokenTTL: server.ttl ?? 600,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: jwks.keys[0].alg } },
          };
        },
      },
    },
  });
  provider.use(async (ctx, next) => {
    await next();
    if (ctx.oidc?.route === 'token') {
      const params = ctx.oidc.params ?? {};
      emit({
        event: 'token',
        status: ctx.status,
        grant_type: params.grant_type ?? null,
        resource: params.resource ?? null,
        scope: params.scope ?? null,
      });
    }
  });
  return provider;
}

const server = http.createServer();
let handle = null;
server.on('request', (req, res) => handle(req, res));
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  const issuer = `http://127.0.0.1:${port}`;
  handle = build(issuer).callback();
  emit({ event: 'ready', issuer });
  const commands = readline.createInterface({ input: process.stdin });
  commands.on('line', (line) => {
    if (line.trim() === 'reload') {
      handle = build(issuer).callback();
      emit({ event: 'reloaded', kids: keys().keys.map((key) => key.kid) });
    }
  });
  commands.on('close', stop); // the test process went away: so does this server
});

function stop() {
  server.closeAllConnections();
  server.close(() => process.exit(0));
}

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, stop);
}
