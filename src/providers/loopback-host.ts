/**
 * Whether a host name or address names this machine's loopback: what the gateway and `berth host` may serve in plain
 * HTTP, and a URL another machine's runtime cannot mean for a caller here.
 */
export const isLoopbackHost = (host: string): boolean => host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
