/**
 * The few key endpoints of a homeserver, in memory, for unit tests of the crypto between two
 * devices: keys/upload, keys/query, keys/claim and sendToDevice, plus a to-device inbox per device.
 * Pure test logic (the real thing is Synapse in the e2e tests).
 */
type Json = Record<string, unknown>;

export class FakeKeyServer {
  private readonly deviceKeys = new Map<string, Map<string, Json>>();
  private readonly oneTimeKeys = new Map<string, Map<string, Json>>();
  private readonly fallbackKeys = new Map<string, Map<string, Json>>();
  private readonly toDevice = new Map<string, Json[]>();
  readonly calls: string[] = [];

  /** doRequest as matrix-bot-sdk's MatrixClient has it, for the device `userId`/`deviceId`. */
  client(userId: string, deviceId: string) {
    return {
      doRequest: (method: string, path: string, _query: unknown, body: Json): Promise<Json> =>
        Promise.resolve(this.handle(userId, deviceId, method, path, body)),
      sendToDevices: (type: string, messages: Record<string, Record<string, Json>>): Promise<Json> => {
        this.calls.push(`sendToDevice ${type}`);
        for (const [user, devices] of Object.entries(messages)) {
          for (const [device, content] of Object.entries(devices)) {
            const targets = device === "*" ? [...(this.deviceKeys.get(user)?.keys() ?? [])] : [device];
            for (const d of targets) {
              const key = `${user}|${d}`;
              this.toDevice.set(key, [...(this.toDevice.get(key) ?? []), { type, sender: userId, content }]);
            }
          }
        }
        return Promise.resolve({});
      },
    };
  }

  /** The to-device events waiting for a device (taken). */
  takeToDevice(userId: string, deviceId: string): Json[] {
    const key = `${userId}|${deviceId}`;
    const events = this.toDevice.get(key) ?? [];
    this.toDevice.delete(key);
    return events;
  }

  oneTimeKeyCount(userId: string, deviceId: string): Record<string, number> {
    const keys = [...(this.oneTimeKeys.get(`${userId}|${deviceId}`)?.keys() ?? [])];
    const counts: Record<string, number> = {};
    for (const id of keys) {
      const algorithm = id.split(":")[0] ?? "";
      counts[algorithm] = (counts[algorithm] ?? 0) + 1;
    }
    return counts;
  }

  private handle(userId: string, deviceId: string, method: string, path: string, body: Json): Json {
    const endpoint = path.replace("/_matrix/client/v3/", "");
    this.calls.push(`${method} ${endpoint}`);
    const self = `${userId}|${deviceId}`;
    if (endpoint === "keys/upload") {
      if (body["device_keys"]) {
        const devices = this.deviceKeys.get(userId) ?? new Map<string, Json>();
        devices.set(deviceId, body["device_keys"] as Json);
        this.deviceKeys.set(userId, devices);
      }
      const otks = this.oneTimeKeys.get(self) ?? new Map<string, Json>();
      for (const [id, key] of Object.entries((body["one_time_keys"] ?? {}) as Json))
        otks.set(id, key as Json);
      this.oneTimeKeys.set(self, otks);
      const fallback = this.fallbackKeys.get(self) ?? new Map<string, Json>();
      for (const [id, key] of Object.entries((body["fallback_keys"] ?? {}) as Json))
        fallback.set(id, key as Json);
      this.fallbackKeys.set(self, fallback);
      return { one_time_key_counts: this.oneTimeKeyCount(userId, deviceId) };
    }
    if (endpoint === "keys/query") {
      const wanted = (body["device_keys"] ?? {}) as Record<string, string[]>;
      const out: Record<string, Json> = {};
      for (const user of Object.keys(wanted)) out[user] = Object.fromEntries(this.deviceKeys.get(user) ?? []);
      return { device_keys: out, failures: {} };
    }
    if (endpoint === "keys/claim") {
      const wanted = (body["one_time_keys"] ?? {}) as Record<string, Record<string, string>>;
      const out: Record<string, Record<string, Json>> = {};
      for (const [user, devices] of Object.entries(wanted)) {
        for (const device of Object.keys(devices)) {
          const otks = this.oneTimeKeys.get(`${user}|${device}`);
          const first = otks ? [...otks.entries()][0] : undefined;
          const pick = first ?? [...(this.fallbackKeys.get(`${user}|${device}`)?.entries() ?? [])][0];
          if (pick === undefined) continue;
          if (first) otks?.delete(first[0]);
          out[user] = { ...(out[user] ?? {}), [device]: { [pick[0]]: pick[1] } };
        }
      }
      return { one_time_keys: out, failures: {} };
    }
    throw new Error(`fake key server: no ${method} ${path}`);
  }
}
