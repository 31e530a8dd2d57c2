package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const (
	// RootUser is the user that EnableAuth sets up, with the role of the
	// same name, which etcd requires before it turns auth on and which may
	// do everything. With --client-cert-auth, etcd takes a client
	// certificate's common name as the user name of a call that carries no
	// token, so a client whose certificate has the common name "root" goes
	// on working after EnableAuth, without a password.
	RootUser = "root"
	rootRole = "root"
	// maxPasswordLen is the longest password, in bytes, that etcd takes:
	// it hashes passwords with bcrypt, which refuses longer ones.
	maxPasswordLen = 72
)

// AuthEnabled tells whether etcd's authentication is on. A client without
// root's rights gets an answer too: etcd refuses it AuthStatus, but checks
// rights only while auth is on, so the refusal means true.
func (c *Client) AuthEnabled(ctx context.Context) (bool, error) {
	var resp *clientv3.AuthStatusResponse
	err := c.do(ctx, "reading whether auth is enabled", func(ctx context.Context) error {
		var err error
		resp, err = c.cli.AuthStatus(ctx)
		return err
	})
	if refusedForAuth(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return resp.Enabled, nil
}

// refusedForAuth tells whether etcd refused a call that needs root's rights
// to a caller without them: no user, an unknown user (a certificate's common
// name that is no user), or a user without the root role. etcd checks
// rights only while auth is on.
func refusedForAuth(err error) bool {
	return errors.Is(err, rpctypes.ErrUserEmpty) ||
		errors.Is(err, rpctypes.ErrUserNotFound) ||
		errors.Is(err, rpctypes.ErrPermissionDenied)
}

// EnableAuth turns etcd's authentication on, with user RootUser, holding
// the root role, whose password is rootPassword. It is idempotent, and
// picks up where a pass that failed half-way stopped:
//   - when auth is already on (AuthEnabled), it does nothing more, and in
//     particular does not change the password: it cannot set up auth again;
//   - otherwise it adds user root with rootPassword, or, when the user is
//     already there, sets its password to rootPassword, so that the caller's
//     Secret is the truth; grants it the root role, which etcd does not
//     refuse when already granted and which needs no RoleAdd; and enables
//     auth, which etcd does not refuse when already on.
//
// A root user that someone added without a password (etcdctl user add
// --no-password) keeps none: etcd ignores a password change for such a
// user, and EnableAuth cannot tell. It can then authenticate only by a
// certificate.
//
// Once auth is on, calls need root's rights: the client goes on working
// when its certificate's common name is "root" (see RootUser), and fails
// with ErrAuth otherwise; a client with Username RootUser and Password
// rootPassword works too. An empty password, or one longer than 72 bytes,
// is ErrInvalid.
func (c *Client) EnableAuth(ctx context.Context, rootPassword string) error {
	const op = "enabling auth"
	if rootPassword == "" {
		return fmt.Errorf("%s: %w: the root password is empty", op, ErrInvalid)
	}
	if len(rootPassword) > maxPasswordLen {
		return fmt.Errorf("%s: %w: the root password is longer than %d bytes, which etcd refuses", op, ErrInvalid, maxPasswordLen)
	}
	enabled, err := c.AuthEnabled(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if enabled {
		return nil
	}
	if err := c.ensureRootUser(ctx, rootPassword); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return c.do(ctx, op, func(ctx context.Context) error {
		_, err := c.cli.AuthEnable(ctx)
		return err
	})
}

// ensureRootUser makes user root exist with password and the root role.
// It adds first and changes the password when the user exists, rather than
// asks first: one call in the usual case, and no window between the
// question and the change.
func (c *Client) ensureRootUser(ctx context.Context, password string) error {
	err := c.do(ctx, "adding user "+RootUser, func(ctx context.Context) error {
		_, err := c.cli.UserAdd(ctx, RootUser, password)
		return err
	})
	if errors.Is(err, rpctypes.ErrUserAlreadyExist) {
		err = c.do(ctx, "setting the password of user "+RootUser, func(ctx context.Context) error {
			_, err := c.cli.UserChangePassword(ctx, RootUser, password)
			return err
		})
	}
	if err != nil {
		return err
	}
	return c.do(ctx, "granting role "+rootRole+" to user "+RootUser, func(ctx context.Context) error {
		_, err := c.cli.UserGrantRole(ctx, RootUser, rootRole)
		return err
	})
}
