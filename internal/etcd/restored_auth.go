package etcd

import (
	"context"
	"fmt"
)

// SetRootPassword sets user RootUser's password. A cluster restored from
// another cluster's snapshot keeps that cluster's users and passwords;
// this makes the new cluster's own Secret the truth. An empty password, or
// one longer than 72 bytes, is ErrInvalid.
func (c *Client) SetRootPassword(ctx context.Context, password string) error {
	const op = "setting the root password"
	if password == "" || len(password) > maxPasswordLen {
		return fmt.Errorf("%s: %w: the password must be 1 to %d bytes", op, ErrInvalid, maxPasswordLen)
	}
	return c.do(ctx, op, func(ctx context.Context) error {
		_, err := c.cli.UserChangePassword(ctx, RootUser, password)
		return err
	})
}

// DisableAuth turns etcd's authentication off, for a cluster restored from
// a snapshot of a cluster that had it on, when the new one should not. It
// needs root's rights, and etcd does not refuse it when auth is off.
func (c *Client) DisableAuth(ctx context.Context) error {
	return c.do(ctx, "disabling auth", func(ctx context.Context) error {
		_, err := c.cli.AuthDisable(ctx)
		return err
	})
}
