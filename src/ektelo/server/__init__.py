"""The kernel as a service (issue #26; the paper's §4 kernel in its own process).

`ektelo-serve` (`app.main`) runs an HTTP server that holds the datasets a
custodian configured (`config`), answers the kernel port's requests in the
wire format of `ektelo.wire` for analysts holding bearer tokens (`auth`),
keeps each client's handle ids per session (`sessions`), and shows the
custodian a read-only status page (`status`). `ektelo-admin` (`admin`) adds
datasets and analysts and issues, rotates and revokes tokens. Clients
connect with `ektelo.connect(url, token)` (`ektelo.client`). See
docs/server.md for configuration, deployment and the security model.
"""
