// Package access decides who sent a request to an agent's runtime (CONTRACT §8, spec 4.6 and 5).
//
// Every credential a runtime accepts becomes one [Identity]: a runtime token, an `ak_` agent API
// key, a browser session (the `svc_session` cookie), an identity-provider bearer token, or the
// `AUTH_TOKEN` of `svc dev`. The visibility rules of spec 4.6 and the scope rule of spec 5.4 read
// the Identity only, so a new credential kind needs no change to them.
//
// The package holds the parts that need no database and no HTTP routes:
//   - [Settings]: an agent's access settings (its OpenID provider, allow rules, collaborators),
//     decoded strictly and validated with errors that name the field;
//   - [Providers]: OpenID providers cached by issuer (discovery once, keys through go-oidc's remote
//     key set, which fetches the JWKS again when a token names a key it does not know, so a key
//     rotation needs no restart) and [Providers.VerifyBearer] for identity-provider tokens;
//   - [SignIn]: the authorization-code flow with PKCE, state and nonce, whose state lives in a
//     sealed cookie so that any runner can finish a flow another runner started;
//   - [Sessions] and [SessionCache]: browser sessions kept where every runner sees them, with a
//     short cache so a cookie check does not read the database on every request;
//   - [CheckCSRF] and the cookie helpers.
//
// Sub-packages: memsessions (Sessions in memory, for svc dev and tests), sessionstest (the
// conformance suite every Sessions runs) and oidctest (an OpenID provider on 127.0.0.1 for tests).
package access
