import type { InvitationRow, MemberRow } from '../../src/members/queries.ts';
import type { Invitation } from '../../src/members/invitations.ts';
import type { Role } from '../../src/members/roles.ts';
import { BASE } from '../env.ts';
import { ErrorNote, Form, IfAllowed, Layout, when } from '../layout.tsx';

type Props = {
  csrf: string;
  email: string;
  memberId: string;
  members: MemberRow[];
  invitations: InvitationRow[];
  /** The roles the signed-in member may give, and whose holders they may change. */
  assignable: readonly Role[];
  error?: string;
  typed?: { email?: string; role?: string };
};

const T = `${BASE}/team`;

function RoleOptions(props: { roles: readonly Role[]; selected?: string }) {
  return <>{props.roles.map((r) => <option value={r} selected={r === props.selected}>{r}</option>)}</>;
}

export function TeamPage(props: Props) {
  return (
    <Layout title="Team" csrf={props.csrf} email={props.email}>
      <p class="muted">
        Owners manage everything, including other owners. Admins manage everything but owners. Developers manage keys,
        webhooks, domains, templates and suppressions. Viewers read every page and change nothing.
      </p>
      <ErrorNote message={props.error} />
      <table id="members">
        <thead><tr><th>Email</th><th>Role</th><th>Last sign-in</th><th>Joined</th><th></th></tr></thead>
        <tbody>
          {props.members.map((m) => {
            const mine = props.assignable.includes(m.role);
            return (
              <tr id={`member-${m.id}`}>
                <td>{m.email}{m.id === props.memberId && <span class="muted"> (you)</span>}</td>
                <td class="role">{m.role}</td>
                <td>{when(m.lastSignInAt)}</td>
                <td>{when(m.createdAt)}</td>
                <td>
                  {mine && (
                    <>
                      <Form action={`${T}/${m.id}/role`} csrf={props.csrf} class="inline">
                        <select name="role" aria-label={`Role of ${m.email}`}><RoleOptions roles={props.assignable} selected={m.role} /></select>{' '}
                        <button type="submit">Change role</button>
                      </Form>{' '}
                      <Form action={`${T}/${m.id}/remove`} csrf={props.csrf} class="inline">
                        <button type="submit">Remove</button>
                      </Form>
                    </>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      <h2>Open invitations</h2>
      {props.invitations.length === 0 ? <p class="muted">None.</p> : (
        <table id="invitations">
          <thead><tr><th>Email</th><th>Role</th><th>Invited by</th><th>Expires</th><th></th></tr></thead>
          <tbody>
            {props.invitations.map((i) => (
              <tr>
                <td>{i.email}</td>
                <td>{i.role}</td>
                <td>{i.invitedByEmail ?? (i.invitedBy ? '—' : 'the CLI')}</td>
                <td>{when(i.expiresAt)}</td>
                <td>
                  {props.assignable.includes(i.role) && (
                    <Form action={`${T}/invitations/${i.id}/withdraw`} csrf={props.csrf} class="inline"><button type="submit">Withdraw</button></Form>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <IfAllowed action={`${T}/invitations`}>
        <h2>Invite someone</h2>
        <p class="muted">The invitation is a link that works once, for 7 days. Whoever opens it sets a password and joins with the role chosen here.</p>
        <Form action={`${T}/invitations`} csrf={props.csrf}>
          <input type="email" name="email" required maxlength={254} placeholder="name@example.com" value={props.typed?.email ?? ''} aria-label="Email" />{' '}
          <select name="role" aria-label="Role"><RoleOptions roles={props.assignable} selected={props.typed?.role ?? 'developer'} /></select>{' '}
          <button type="submit">Invite</button>
        </Form>
      </IfAllowed>
    </Layout>
  );
}

export function InvitedPage(props: { csrf: string; email: string; invitation: Invitation }) {
  const i = props.invitation;
  return (
    <Layout title="Invitation made" csrf={props.csrf} email={props.email}>
      <p class="note">
        Send this link to {i.email}. It is shown only this once, works once, and expires {when(new Date(i.expires_at))}.
      </p>
      <p><code class="secret" id="invite-url">{i.invite_url}</code></p>
      <p><a href={T}>Back to the team</a></p>
    </Layout>
  );
}
