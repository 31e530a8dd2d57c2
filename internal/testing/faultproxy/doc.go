// Package faultproxy is a real HTTP reverse proxy on 127.0.0.1 that tests put
// between an AWS SDK client and moto_server to make the upstream misbehave on
// demand: pass through, throttle with the errors that SQS sends through the
// AWS JSON 1.0 protocol, fail with 500 or 503, or hang until the client gives
// up. It counts the requests that it receives in each mode, so that tests
// assert "no hot loop" or "backoff observed" by counts, never by time.
//
// It is for tests only. It listens on 127.0.0.1 alone, forwards only to the
// one target it was given, and knows nothing of Tend's packages.
package faultproxy
