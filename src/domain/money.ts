import { z } from 'zod';

/**
 * Active ISO 4217 currency codes that can be paid in (amendment 179, 2025): fund codes (BOV, CHE, CHW, CLF, COU,
 * MXV, USN, UYI, UYW), precious metals (XAU, XAG, XPD, XPT), bond-market units (XBA–XBD), XDR, XSU, XUA, the test code
 * XTS and XXX are left out on purpose: no card network settles them. ANG and XCG are both listed while the Netherlands
 * Antillean guilder is phased out; withdrawn codes (HRK, ZWL, SLL, CUC, ...) are not.
 */
// prettier-ignore
export const currencyCodes = [
  'AED', 'AFN', 'ALL', 'AMD', 'ANG', 'AOA', 'ARS', 'AUD', 'AWG', 'AZN', 'BAM', 'BBD', 'BDT', 'BGN', 'BHD', 'BIF',
  'BMD', 'BND', 'BOB', 'BRL', 'BSD', 'BTN', 'BWP', 'BYN', 'BZD', 'CAD', 'CDF', 'CHF', 'CLP', 'CNY', 'COP', 'CRC',
  'CUP', 'CVE', 'CZK', 'DJF', 'DKK', 'DOP', 'DZD', 'EGP', 'ERN', 'ETB', 'EUR', 'FJD', 'FKP', 'GBP', 'GEL', 'GHS',
  'GIP', 'GMD', 'GNF', 'GTQ', 'GYD', 'HKD', 'HNL', 'HTG', 'HUF', 'IDR', 'ILS', 'INR', 'IQD', 'IRR', 'ISK', 'JMD',
  'JOD', 'JPY', 'KES', 'KGS', 'KHR', 'KMF', 'KPW', 'KRW', 'KWD', 'KYD', 'KZT', 'LAK', 'LBP', 'LKR', 'LRD', 'LSL',
  'LYD', 'MAD', 'MDL', 'MGA', 'MKD', 'MMK', 'MNT', 'MOP', 'MRU', 'MUR', 'MVR', 'MWK', 'MXN', 'MYR', 'MZN', 'NAD',
  'NGN', 'NIO', 'NOK', 'NPR', 'NZD', 'OMR', 'PAB', 'PEN', 'PGK', 'PHP', 'PKR', 'PLN', 'PYG', 'QAR', 'RON', 'RSD',
  'RUB', 'RWF', 'SAR', 'SBD', 'SCR', 'SDG', 'SEK', 'SGD', 'SHP', 'SLE', 'SOS', 'SRD', 'SSP', 'STN', 'SVC', 'SYP',
  'SZL', 'THB', 'TJS', 'TMT', 'TND', 'TOP', 'TRY', 'TTD', 'TWD', 'TZS', 'UAH', 'UGX', 'USD', 'UYU', 'UZS', 'VED',
  'VES', 'VND', 'VUV', 'WST', 'XAF', 'XCD', 'XCG', 'XOF', 'XPF', 'YER', 'ZAR', 'ZMW', 'ZWG',
] as const;

const currencySet: ReadonlySet<string> = new Set(currencyCodes);

/** An active ISO 4217 code, upper case (`usd` is rejected, not corrected: the caller has a bug worth seeing). */
export const Currency = z
  .string()
  .regex(/^[A-Z]{3}$/, { message: 'currency must be three upper-case letters (ISO 4217)' })
  .refine((code) => currencySet.has(code), { message: 'currency is not an active ISO 4217 code' })
  .transform((code) => code as CurrencyCode);
export type CurrencyCode = (typeof currencyCodes)[number];
export type Currency = z.output<typeof Currency>;

/** An amount in integer minor units (cents), positive and exactly representable. */
export const MinorUnits = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);

/** Money: integer minor units plus currency. Floats never carry money. */
export const Money = z.strictObject({
  value: MinorUnits,
  currency: Currency,
});
export type Money = z.output<typeof Money>;
