// Package moto runs a real moto_server (moto 5.2.1, the AWS API emulator) on
// 127.0.0.1 for tests: one server per test package from TestMain, or one for
// a single test. It finds a free port, waits until the server answers, resets
// it on demand, and kills its whole process group when done.
//
// It also makes the test process deterministic and sealed: fake credentials,
// region us-east-1, every AWS endpoint pointed at the server, no shared config
// or instance metadata, and a dead HTTP proxy for any host that is not
// loopback, so that no request can leave the machine.
//
// It is for tests only. It never skips: when moto_server cannot be found or
// does not start, the tests fail and say why. It knows nothing of Tend's
// packages.
package moto
