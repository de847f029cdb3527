/**
 * Paths a client names (a config file to train, a folder to export into) resolve against the
 * workspace. On loopback the token holder is the user, who may name any file; a server bound to
 * another interface (`--host`) confines them to the workspace, so a remote token holder can neither
 * read files outside it (an invalid config's error quotes the file) nor write outside it.
 */
import { relative, resolve, sep } from 'node:path';
import { ErrorCodes, RpcError } from '../protocol/json-rpc.ts';

export type ResolveClientPath = (path: string, what: string) => string;

export function clientPathResolver(workspace: string, confined: boolean): ResolveClientPath {
  return (path, what) => {
    const abs = resolve(workspace, path);
    const rel = relative(workspace, abs);
    if (confined && (rel === '..' || rel.startsWith(`..${sep}`) || resolve(workspace, rel) !== abs)) {
      throw new RpcError(ErrorCodes.FileError, `${what} ${JSON.stringify(path)} is outside the workspace ${workspace}; a server listening beyond loopback only reads and writes inside it`);
    }
    return abs;
  };
}
