/** htm bound to preact's h: the console's JSX without a build step. */
import { h } from 'preact';
import htm from 'htm';

export const html = htm.bind(h);
